package cluster

import (
	"errors"
	"sync"
	"time"
)

// A forwarded request or answer larger than one NATS message (max_payload,
// 1 MiB by default) travels in parts over core NATS, each part a
// request/reply, so the sender never runs ahead of the receiver:
//
//   - upload: the forwarder sends the request's envelope (part 0), then its
//     body in parts 1..n, the last one marked. The owner acks each part
//     with an empty reply and answers the last with the request's answer.
//   - download: an answer too large for one message is kept by the owner,
//     which replies with its envelope and size; the forwarder then fetches
//     the body part by part, by offset.
//
// What the owner keeps for them is bounded in count (maxTransfers each
// way), in size (an upload stops at the API's body limit) and in time:
// a transfer not finished within its deadline is dropped, whatever the
// sender does. Nothing waits on a goroutine meanwhile: a timer frees it.
const (
	// maxTransfers bounds the uploads, and the downloads, a node keeps at
	// once.
	maxTransfers = 16
	// partRoom is what a part leaves of max_payload for its headers.
	partRoom = 4 << 10
	// envelopeRoom is what the single-message path leaves of max_payload
	// for the envelope around the body (method, URL, headers).
	envelopeRoom = 64 << 10
)

// Headers of the parts of a transfer.
const (
	hdrTransfer = "Tandem-Transfer" // the transfer's id, chosen by the forwarder (upload) or the owner (download)
	hdrPart     = "Tandem-Part"     // upload: the part's number, 0 being the envelope
	hdrLast     = "Tandem-Last"     // upload: the body's last part; download: the answer's last part
	hdrCancel   = "Tandem-Cancel"   // upload: the forwarder gave up
	hdrOffset   = "Tandem-Offset"   // download: where the part starts
	hdrError    = "Tandem-Error"    // download: the part cannot be had
)

var (
	errTransferBusy     = errors.New("too many transfers under way")
	errTransferExists   = errors.New("transfer already open")
	errTransferUnknown  = errors.New("no such transfer: never opened, finished, or abandoned past its deadline")
	errTransferOrder    = errors.New("transfer part out of order")
	errTransferTooLarge = errors.New("transfer over the size limit")
)

// transfer is one upload being reassembled or one download being fetched.
type transfer struct {
	env   forwarded // upload: the request without its body
	body  []byte
	part  int // upload: the next part expected
	timer *time.Timer
}

// transfers holds a node's transfers of one direction.
type transfers struct {
	max     int           // at once
	maxSize int64         // bytes of one transfer's body
	ttl     time.Duration // from open to done

	mu sync.Mutex
	m  map[string]*transfer
}

func newTransfers(max int, maxSize int64, ttl time.Duration) *transfers {
	return &transfers{max: max, maxSize: maxSize, ttl: ttl, m: map[string]*transfer{}}
}

// add keeps t under id until its deadline, unless too many are kept.
func (ts *transfers) add(id string, t *transfer) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, ok := ts.m[id]; ok {
		return errTransferExists
	}
	if len(ts.m) >= ts.max {
		return errTransferBusy
	}
	ts.m[id] = t
	t.timer = time.AfterFunc(ts.ttl, func() { ts.expire(id, t) })
	return nil
}

func (ts *transfers) expire(id string, t *transfer) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m[id] == t {
		delete(ts.m, id)
	}
}

// removeLocked forgets id's transfer. Callers hold ts.mu.
func (ts *transfers) removeLocked(id string) {
	if t, ok := ts.m[id]; ok {
		t.timer.Stop()
		delete(ts.m, id)
	}
}

// drop forgets id's transfer, if it is kept.
func (ts *transfers) drop(id string) {
	ts.mu.Lock()
	ts.removeLocked(id)
	ts.mu.Unlock()
}

// open starts an upload of the request env, whose body follows in parts.
func (ts *transfers) open(id string, env forwarded) error {
	env.Body = nil
	return ts.add(id, &transfer{env: env, part: 1})
}

// append adds the upload's part. When last, the upload is done: it is
// forgotten and returned whole. An error drops the upload, but for an
// unknown one, which is not there to drop.
func (ts *transfers) append(id string, part int, data []byte, last bool) (*transfer, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[id]
	if !ok {
		return nil, errTransferUnknown
	}
	switch {
	case part != t.part:
		ts.removeLocked(id)
		return nil, errTransferOrder
	case int64(len(t.body))+int64(len(data)) > ts.maxSize:
		ts.removeLocked(id)
		return nil, errTransferTooLarge
	}
	t.body = append(t.body, data...)
	t.part++
	if !last {
		return nil, nil
	}
	ts.removeLocked(id)
	return t, nil
}

// keep holds an answer's body for the forwarder to fetch.
func (ts *transfers) keep(id string, body []byte) error {
	if int64(len(body)) > ts.maxSize {
		return errTransferTooLarge
	}
	return ts.add(id, &transfer{body: body})
}

// read returns up to n bytes of the download from offset, and whether they
// are its last: then it is forgotten.
func (ts *transfers) read(id string, offset int64, n int) ([]byte, bool, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[id]
	if !ok {
		return nil, false, errTransferUnknown
	}
	if offset < 0 || offset > int64(len(t.body)) {
		ts.removeLocked(id)
		return nil, false, errTransferOrder
	}
	end := min(int64(len(t.body)), offset+int64(n))
	part := t.body[offset:end]
	last := end == int64(len(t.body))
	if last {
		ts.removeLocked(id)
	}
	return part, last, nil
}

// clear forgets every transfer, stopping their timers.
func (ts *transfers) clear() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for id := range ts.m {
		ts.removeLocked(id)
	}
}

// count is how many transfers are kept.
func (ts *transfers) count() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.m)
}
