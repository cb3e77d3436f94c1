package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUploadReassemblesPartsInOrder(t *testing.T) {
	ts := newTransfers(2, 10, time.Minute)
	require.NoError(t, ts.open("a", forwarded{Method: "POST", URL: "/x", Body: []byte("ignored")}))
	got, err := ts.append("a", 1, []byte("hello"), false)
	require.NoError(t, err)
	assert.Nil(t, got, "not done before the last part")
	got, err = ts.append("a", 2, []byte(" you"), true)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, "hello you", string(got.body))
	assert.Equal(t, "/x", got.env.URL)
	assert.Zero(t, ts.count(), "a finished upload is forgotten")
	_, err = ts.append("a", 3, []byte("!"), true)
	assert.ErrorIs(t, err, errTransferUnknown)
}

func TestUploadBounds(t *testing.T) {
	ts := newTransfers(2, 10, time.Minute)
	require.NoError(t, ts.open("a", forwarded{}))
	assert.ErrorIs(t, ts.open("a", forwarded{}), errTransferExists)
	require.NoError(t, ts.open("b", forwarded{}))
	assert.ErrorIs(t, ts.open("c", forwarded{}), errTransferBusy, "at most max at once")

	// Over the size: dropped, and its slot freed.
	_, err := ts.append("a", 1, []byte("0123456789"), false)
	require.NoError(t, err)
	_, err = ts.append("a", 2, []byte("x"), true)
	assert.ErrorIs(t, err, errTransferTooLarge)
	assert.Equal(t, 1, ts.count())

	// A part out of order (lost, repeated, forged): dropped.
	_, err = ts.append("b", 2, []byte("x"), true)
	assert.ErrorIs(t, err, errTransferOrder)
	assert.Zero(t, ts.count())
	require.NoError(t, ts.open("c", forwarded{}), "freed slots are taken again")
	ts.drop("c")
	assert.Zero(t, ts.count())
}

// Uploads and downloads nobody finishes are freed at their deadline, and
// their parts are refused after it.
func TestAbandonedTransfersAreFreedAtTheirDeadline(t *testing.T) {
	up := newTransfers(4, 1<<20, 50*time.Millisecond)
	down := newTransfers(4, 1<<20, 50*time.Millisecond)
	for i := range 4 {
		id := strconv.Itoa(i)
		require.NoError(t, up.open(id, forwarded{}))
		_, err := up.append(id, 1, make([]byte, 1000), false)
		require.NoError(t, err)
		require.NoError(t, down.keep(id, make([]byte, 1000)))
	}
	assert.ErrorIs(t, up.open("more", forwarded{}), errTransferBusy)
	assert.ErrorIs(t, down.keep("more", nil), errTransferBusy)
	require.Eventually(t, func() bool { return up.count() == 0 && down.count() == 0 }, 5*time.Second, 5*time.Millisecond)
	_, err := up.append("0", 2, []byte("late"), true)
	assert.ErrorIs(t, err, errTransferUnknown)
	_, _, err = down.read("0", 0, 10)
	assert.ErrorIs(t, err, errTransferUnknown)
	require.NoError(t, up.open("more", forwarded{}))
}

func TestDownloadReadsByOffset(t *testing.T) {
	ts := newTransfers(1, 100, time.Minute)
	assert.ErrorIs(t, ts.keep("big", make([]byte, 101)), errTransferTooLarge)
	require.NoError(t, ts.keep("a", []byte("0123456789")))
	p, last, err := ts.read("a", 0, 4)
	require.NoError(t, err)
	assert.Equal(t, "0123", string(p))
	assert.False(t, last)
	p, last, err = ts.read("a", 4, 100)
	require.NoError(t, err)
	assert.Equal(t, "456789", string(p))
	assert.True(t, last)
	assert.Zero(t, ts.count(), "fetched whole: forgotten")
}

// startNATS runs a NATS server whose messages are at most maxPayload bytes.
func startNATS(t *testing.T, maxPayload int32) *nats.Conn {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, MaxPayload: maxPayload})
	require.NoError(t, err)
	go ns.Start()
	require.True(t, ns.ReadyForConnections(10*time.Second))
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	nc, err := nats.Connect(ns.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// forwardingNode is a node that forwards to itself over NATS: its local
// handler is what the owner serves. It takes no lease: the requests go
// to routes outside any workspace.
func forwardingNode(t *testing.T, nc *nats.Conn, maxBody int64, local http.Handler) *Node {
	n := New(Config{NodeID: "n-" + uuid.NewString(), NATS: nc, MaxBody: maxBody, ForwardTimeout: 5 * time.Second})
	n.local = local
	n.serving = make(chan struct{}, maxServing)
	for subj, h := range map[string]nats.MsgHandler{
		subject(n.ID()): n.serveForwarded, uploadSubject(n.ID()): n.serveUpload, downloadSubject(n.ID()): n.serveDownload,
	} {
		sub, err := nc.Subscribe(subj, h)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, nc.Flush())
	t.Cleanup(func() {
		n.Close()
	})
	return n
}

// Bodies and answers of several messages go through whole, whatever
// their size relative to a part; one over the body limit is a 413.
func TestForwardCarriesBodiesAndAnswersOfManyMessages(t *testing.T) {
	nc := startNATS(t, 256<<10)
	n := forwardingNode(t, nc, 4<<20, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(body)
		w.Header().Set("X-Sum", hex.EncodeToString(sum[:]))
		w.Header().Set("X-Len", strconv.Itoa(len(body)))
		// The answer is the body, twice: larger than what came in.
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
		_, _ = w.Write(body)
	}))
	part := n.partSize()
	for _, size := range []int{0, 10, int(n.singleLimit()), int(n.singleLimit()) + 1, part, part + 1, 2 * part, 3*part + 17, 4 << 20} {
		body := make([]byte, size)
		_, _ = rand.Read(body)
		r := httptest.NewRequest("POST", "/echo", bytes.NewReader(body))
		w := httptest.NewRecorder()
		n.forward(w, r, "", n.ID())
		require.Equal(t, http.StatusCreated, w.Code, "size %d: %s", size, w.Body.String())
		sum := sha256.Sum256(body)
		assert.Equal(t, hex.EncodeToString(sum[:]), w.Header().Get("X-Sum"), "size %d: the owner got the body whole", size)
		assert.True(t, bytes.Equal(append(append([]byte{}, body...), body...), w.Body.Bytes()), "size %d: the answer came back whole", size)
	}
	assert.Zero(t, n.uploads.count())
	assert.Zero(t, n.downloads.count())

	r := httptest.NewRequest("POST", "/echo", bytes.NewReader(make([]byte, 4<<20+1)))
	w := httptest.NewRecorder()
	n.forward(w, r, "", n.ID())
	assert.Equal(t, http.StatusRequestEntityTooLarge, w.Code)
	assert.Contains(t, w.Body.String(), "body_too_large")
	require.Eventually(t, func() bool { return n.uploads.count() == 0 }, 5*time.Second, 5*time.Millisecond,
		"the owner frees an upload its forwarder gave up")
}

// A forwarder that gives up mid-upload (its request's context done, its
// body unreadable) tells the owner, which frees the upload at once, not
// at its deadline.
func TestAbandonedUploadIsFreedAtOnce(t *testing.T) {
	nc := startNATS(t, 256<<10)
	n := forwardingNode(t, nc, 4<<20, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("an abandoned upload is never served")
	}))
	n.uploads.ttl = time.Hour
	for _, how := range []string{"canceled", "unreadable"} {
		pr, pw := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := n.upload(ctx, n.ID(), forwarded{Method: "POST", URL: "/echo"}, pr)
			done <- err
		}()
		// Two parts' worth: the upload is open on the owner.
		_, err := pw.Write(make([]byte, 2*n.partSize()))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return n.uploads.count() == 1 }, 5*time.Second, 5*time.Millisecond, how)
		if how == "canceled" {
			cancel()
			// The next part cannot be sent: its request's context is done.
			// (The write returns when the pipe is closed below.)
			go func() { _, _ = pw.Write(make([]byte, n.partSize())) }()
			require.ErrorIs(t, <-done, context.Canceled)
		} else {
			pw.CloseWithError(io.ErrClosedPipe)
			require.ErrorIs(t, <-done, errReadBody)
		}
		require.Eventually(t, func() bool { return n.uploads.count() == 0 }, 5*time.Second, 5*time.Millisecond, how)
		cancel()
		pr.Close()
	}
}

// Whoever can publish on the bus cannot make a node keep more than
// maxTransfers uploads, nor keep them past their deadline.
func TestUploadFloodIsBounded(t *testing.T) {
	nc := startNATS(t, 256<<10)
	n := forwardingNode(t, nc, 4<<20, http.NotFoundHandler())
	n.uploads.ttl = 200 * time.Millisecond
	head, _ := json.Marshal(forwarded{Method: "POST", URL: "/echo"})
	busy := 0
	for range 3 * maxTransfers {
		m := nats.NewMsg(uploadSubject(n.ID()))
		m.Header.Set(hdrTransfer, uuid.NewString())
		m.Header.Set(hdrPart, "0")
		m.Data = head
		reply, err := nc.RequestMsg(m, 5*time.Second)
		require.NoError(t, err)
		if len(reply.Data) > 0 {
			var f forwarded
			require.NoError(t, json.Unmarshal(reply.Data, &f))
			assert.Equal(t, http.StatusServiceUnavailable, f.Status)
			busy++
		}
	}
	assert.Equal(t, 2*maxTransfers, busy)
	assert.Equal(t, maxTransfers, n.uploads.count())
	require.Eventually(t, func() bool { return n.uploads.count() == 0 }, 5*time.Second, 5*time.Millisecond)
}
