package main

// The cluster phase: three `tandem serve` nodes of the measured binary on
// one PostgreSQL database and one NATS server, -cluster-streams SSE
// streams attached to each node over -cluster-workspaces workspaces, all
// of them created (so owned) on node 1. Its figures:
//
//   - delta delivery p50/p99 to the clients, on every node, of the first
//     workspace's streams while one of its sessions streams stamped
//     deltas, beside the same measure on two one-node clusters (one node
//     on PostgreSQL and NATS as well, so that the ratio shows what the
//     other nodes cost, not what the store does): one with one node's
//     streams (the target's baseline: cluster p99 ≤ 2× its p99) and one
//     with the whole cluster's, the same work where the nodes share the
//     host's cores; and the servers' CPU per delta per client;
//   - prompt accept p50/p99 of prompts POSTed to the workspace's owner and
//     of prompts POSTed to the other nodes, which forward them to the
//     owner over NATS, alternating; the ratio is forwarded p99 over owner
//     p99 (target ≤ 2).
//
// PostgreSQL is a throwaway server started from Debian's binaries (as
// pgtest does, or the one TANDEM_TEST_POSTGRES names), NATS from its Go
// module in a child process of this program. Without PostgreSQL the phase
// fails, saying how to get it.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/tandem-dev/tandem/e2e/benchkit"
	"github.com/tandem-dev/tandem/internal/store/postgres/pgtest"
)

// The cluster phase's flags, registered beside main's, which parses them.
var (
	clusterNodes      = flag.Int("cluster-nodes", 3, "cluster phase: nodes of the cluster")
	clusterStreams    = flag.Int("cluster-streams", 1000, "cluster phase: SSE streams attached to each node")
	clusterWorkspaces = flag.Int("cluster-workspaces", 4, "cluster phase: workspaces the streams are spread over")
	clusterPrompts    = flag.Int("cluster-prompts", 400, "cluster phase: prompts timed, half to the owner, half to the other nodes")
	clusterPosters    = flag.Int("cluster-posters", 4, "cluster phase: posters sending those prompts, each waiting for its run to end")
	clusterDeltas     = flag.Int("cluster-deltas", 200, "cluster phase: stamped deltas streamed for delta delivery")
	clusterDebug      = flag.Bool("cluster-debug", false, "cluster phase: serve each node's profiles (--debug-addr) and print where (also when TANDEM_DEBUG_ADDR is set)")
)

func clusterMetrics(config) []metric {
	n, all := *clusterNodes, *clusterNodes**clusterStreams
	return []metric{
		{"cluster-delta-p50-1", fmt.Sprintf("cluster: delta delivery p50, 1 node, %d streams", *clusterStreams), "ns"},
		{"cluster-delta-p99-1", fmt.Sprintf("cluster: delta delivery p99, 1 node, %d streams", *clusterStreams), "ns"},
		{"cluster-delta-p50-all", fmt.Sprintf("cluster: delta delivery p50, 1 node, %d streams", all), "ns"},
		{"cluster-delta-p99-all", fmt.Sprintf("cluster: delta delivery p99, 1 node, %d streams", all), "ns"},
		{"cluster-delta-p50-n", fmt.Sprintf("cluster: delta delivery p50, %d nodes, %d streams each", n, *clusterStreams), "ns"},
		{"cluster-delta-p99-n", fmt.Sprintf("cluster: delta delivery p99, %d nodes, %d streams each", n, *clusterStreams), "ns"},
		{"cluster-delta-p99-remote", "cluster: delta delivery p99, the other nodes' clients", "ns"},
		{"cluster-delta-ratio", fmt.Sprintf("cluster: delta p99, %d nodes / 1 node of %d streams (target ≤ 2)", n, *clusterStreams), "×"},
		{"cluster-delta-ratio-all", fmt.Sprintf("cluster: delta p99, %d nodes / 1 node of %d streams (same clients)", n, all), "×"},
		{"cluster-cpu-1", fmt.Sprintf("cluster: server CPU per delta per client, 1 node, %d streams", *clusterStreams), "µs"},
		{"cluster-cpu-all", fmt.Sprintf("cluster: server CPU per delta per client, 1 node, %d streams", all), "µs"},
		{"cluster-cpu-n", fmt.Sprintf("cluster: server CPU per delta per client, %d nodes", n), "µs"},
		{"cluster-accept-p50-1", fmt.Sprintf("cluster: prompt accept p50, 1 node, %d streams", *clusterStreams), "ns"},
		{"cluster-accept-p99-1", fmt.Sprintf("cluster: prompt accept p99, 1 node, %d streams", *clusterStreams), "ns"},
		{"cluster-accept-p50-all", fmt.Sprintf("cluster: prompt accept p50, 1 node, %d streams", all), "ns"},
		{"cluster-accept-p99-all", fmt.Sprintf("cluster: prompt accept p99, 1 node, %d streams", all), "ns"},
		{"cluster-accept-p50-owner", "cluster: prompt accept p50, sent to the owner", "ns"},
		{"cluster-accept-p99-owner", "cluster: prompt accept p99, sent to the owner", "ns"},
		{"cluster-accept-p50-fwd", "cluster: prompt accept p50, sent to another node", "ns"},
		{"cluster-accept-p99-fwd", "cluster: prompt accept p99, sent to another node", "ns"},
		{"cluster-accept-ratio", "cluster: accept p99, another node / owner (target ≤ 2)", "×"},
	}
}

// clusterCase is one cluster the phase measures: nodes nodes with streams
// streams each, its figures under key.
type clusterCase struct {
	nodes, streams int
	key            string
}

// runCluster measures a one-node cluster, then a cluster of
// -cluster-nodes, on one PostgreSQL server (a database each) and a NATS
// server each.
func runCluster(cfg config, bin, modelURL string, res result) error {
	if *clusterNodes < 2 || *clusterStreams < 1 || *clusterWorkspaces < 1 || *clusterPrompts < 2 || *clusterPosters < 1 || *clusterDeltas < 1 {
		return errors.New("bad -cluster-* flags: at least 2 nodes, 1 stream, 1 workspace, 2 prompts, 1 poster, 1 delta")
	}
	pg, err := pgtest.Start()
	if err != nil {
		return fmt.Errorf("the cluster phase needs PostgreSQL: %w\n"+
			"Install it (Debian: apt-get install postgresql) so loadbench can start a throwaway server, "+
			"or set %s to the URL of a server whose role may create databases", err, pgtest.EnvURL)
	}
	defer func() {
		if err := pg.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "loadbench: stop PostgreSQL: %v\n", err)
		}
	}()
	// One node with one node's clients, one node with the whole
	// cluster's, and the cluster: on a host whose cores the nodes share,
	// the second is the same work on one node.
	for _, cc := range []clusterCase{
		{nodes: 1, streams: *clusterStreams, key: "1"},
		{nodes: 1, streams: *clusterNodes * *clusterStreams, key: "all"},
		{nodes: *clusterNodes, streams: *clusterStreams, key: "n"},
	} {
		fmt.Fprintf(os.Stderr, "phase: cluster of %d node(s), %d streams each\n", cc.nodes, cc.streams)
		if err := measureCluster(cfg, bin, modelURL, pg, cc, res); err != nil {
			return fmt.Errorf("%d node(s): %w", cc.nodes, err)
		}
	}
	res["cluster-delta-ratio"] = res["cluster-delta-p99-n"] / res["cluster-delta-p99-1"]
	res["cluster-delta-ratio-all"] = res["cluster-delta-p99-n"] / res["cluster-delta-p99-all"]
	res["cluster-accept-ratio"] = res["cluster-accept-p99-fwd"] / res["cluster-accept-p99-owner"]
	return nil
}

// cluster is n nodes on one database and one NATS server.
type cluster struct {
	nodes   []*server
	clients []*client
	stop    []func()
}

func (c *cluster) close() {
	for _, cl := range c.clients {
		cl.close()
	}
	for i := len(c.stop) - 1; i >= 0; i-- {
		c.stop[i]()
	}
}

// cpu is the CPU time the nodes have used.
func (c *cluster) cpu() time.Duration {
	var sum time.Duration
	for _, s := range c.nodes {
		sum += s.cpu()
	}
	return sum
}

func startCluster(bin, modelURL string, pg *pgtest.Server, n int) (_ *cluster, err error) {
	c := &cluster{}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pg.CreateDatabase(ctx)
	if err != nil {
		return nil, err
	}
	c.stop = append(c.stop, func() { _ = pg.DropDatabase(context.Background(), db) })
	ns, err := startNATS()
	if err != nil {
		return nil, err
	}
	c.stop = append(c.stop, ns.stop)
	// A debug address in the environment would be every node's: each
	// gets one of its own instead.
	debug := *clusterDebug || os.Getenv("TANDEM_DEBUG_ADDR") != ""
	// One after the other: the first creates the tables.
	for i := range n {
		env := []string{"TANDEM_STORE=" + db, "TANDEM_BUS=" + ns.url, "TANDEM_NODE_ID=loadbench-" + strconv.Itoa(i+1)}
		if debug {
			env = append(env, "TANDEM_DEBUG_ADDR=127.0.0.1:0")
		}
		srv, err := startServer(bin, modelURL, env...)
		if err != nil {
			return nil, err
		}
		if debug {
			fmt.Fprintf(os.Stderr, "node %d: %s, profiles on http://%s/debug/pprof/\n", i+1, srv.url, debugAddr(srv))
		}
		c.nodes = append(c.nodes, srv)
		c.stop = append(c.stop, srv.stop)
		c.clients = append(c.clients, newClient(srv))
	}
	return c, nil
}

// debugAddr is where srv serves its profiles, as its log says.
func debugAddr(srv *server) string {
	log, _ := os.ReadFile(filepath.Join(srv.dir, "server.log"))
	for _, line := range strings.Split(string(log), "\n") {
		if !strings.Contains(line, "serving runtime profiles") {
			continue
		}
		if _, addr, ok := strings.Cut(line, "addr="); ok {
			return strings.Fields(addr)[0]
		}
	}
	return "(not in its log)"
}

// natsServer is a NATS server with JetStream in a process of its own, as
// a deployment runs it: in this one, its goroutines would wait behind the
// thousands of clients' for this process's threads, and every event and
// forwarded command crossing it would wait with them. The process is this
// program again, which runs the server instead when natsEnv names a
// directory for it.
type natsServer struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	url  string
	dir  string
	exit chan error
}

// natsEnv names the directory of the NATS server a child runs.
const natsEnv = "LOADBENCH_NATS_DIR"

func init() {
	if dir := os.Getenv(natsEnv); dir != "" {
		if err := serveNATS(dir); err != nil {
			fmt.Fprintf(os.Stderr, "loadbench nats: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// serveNATS runs the child's NATS server, prints its URL and serves until
// its standard input ends: the parent closed it, or died, which closes it
// too, so no server outlives its loadbench.
func serveNATS(dir string) error {
	s, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: dir,
	})
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return errors.New("not ready within 10 s")
	}
	fmt.Println(s.ClientURL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

func startNATS() (*natsServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "loadbench-nats-")
	if err != nil {
		return nil, err
	}
	n := &natsServer{cmd: exec.Command(self), dir: dir, exit: make(chan error, 1)}
	n.cmd.Env = append(os.Environ(), natsEnv+"="+dir)
	n.cmd.Stderr = os.Stderr
	if n.in, err = n.cmd.StdinPipe(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := n.cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start nats server: %w", err)
	}
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			url <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		n.exit <- n.cmd.Wait()
	}()
	select {
	case n.url = <-url:
		return n, nil
	case err := <-n.exit:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("nats server exited: %v", err)
	case <-time.After(30 * time.Second):
		n.stop()
		return nil, errors.New("nats server did not start within 30 s")
	}
}

// stop ends the server (its standard input closed) and removes its data.
func (n *natsServer) stop() {
	n.in.Close()
	awaitExit(n.cmd, n.exit)
	os.RemoveAll(n.dir)
}

// measureCluster starts the case's nodes, attaches the streams, times the
// prompts, then the delta delivery, and records the case's figures.
func measureCluster(cfg config, bin, modelURL string, pg *pgtest.Server, cc clusterCase, res result) error {
	c, err := startCluster(bin, modelURL, pg, cc.nodes)
	if err != nil {
		return err
	}
	defer c.close()
	var dirs []string
	defer func() {
		for _, d := range dirs {
			os.RemoveAll(d)
		}
	}()
	// Every workspace is created on node 1, which so takes (owns) it.
	wss := make([]string, *clusterWorkspaces)
	for i := range wss {
		d, err := os.MkdirTemp("", "loadbench-ws-")
		if err != nil {
			return err
		}
		dirs = append(dirs, d)
		if wss[i], err = c.clients[0].workspace(d); err != nil {
			return err
		}
	}
	measured := wss[0]
	tracker, unfollow, err := followRuns(c.clients[0], measured)
	if err != nil {
		return err
	}
	defer unfollow()

	// The streams, round robin over the workspaces on each node; those of
	// the measured workspace read its deltas.
	var (
		readers []*reader
		remote  int // readers[remote:] are on nodes other than the owner
		all     []*stream
		reading sync.WaitGroup
	)
	defer func() {
		closeStreams(all)
		reading.Wait()
	}()
	for node, cl := range c.clients {
		if node == 1 {
			remote = len(readers)
		}
		for w, ws := range wss {
			k := cc.streams / len(wss)
			if w < cc.streams%len(wss) {
				k++
			}
			ss, err := (&bench{c: cl, ws: ws}).openStreams(k)
			if err != nil {
				return fmt.Errorf("open streams on node %d: %w", node+1, err)
			}
			all = append(all, ss...)
			if ws != measured {
				continue // idle: the server holds them, nothing reads them
			}
			for _, s := range ss {
				rd := &reader{s: s}
				readers = append(readers, rd)
				reading.Go(rd.read)
			}
		}
	}
	if cc.nodes == 1 {
		remote = len(readers)
	}

	if err := clusterAccept(c, tracker, measured, cc, res); err != nil {
		return err
	}
	return clusterDelivery(cfg, c, tracker, measured, readers, &reading, remote, cc.key, res)
}

// clusterAccept times -cluster-prompts fast prompts, each poster on a
// session of its own posting its next prompt once its run completed. On
// a cluster every other prompt goes to a node that is not the owner
// (these in turn), the others to the owner (node 1).
func clusterAccept(c *cluster, tracker *runs, ws string, cc clusterCase, res result) error {
	// Warm up every path (connections, the owner's lookups) untimed.
	for node := range c.clients {
		if _, err := clusterPrompt(c.clients[node], tracker, ws, ""); err != nil {
			return err
		}
	}
	n := cc.nodes
	var (
		mu         sync.Mutex
		owner, fwd benchkit.Hist
		wg         sync.WaitGroup
		errs       = make([]error, *clusterPosters)
	)
	per := *clusterPrompts / *clusterPosters
	for p := range *clusterPosters {
		sid, err := c.clients[0].session(ws)
		if err != nil {
			return err
		}
		wg.Go(func() {
			var own, other benchkit.Hist
			for i := range per {
				// Poster p starts at a different place in the cycle, so
				// that both kinds are in flight at once.
				k := p + i
				node := 0
				if n > 1 && k%2 == 1 {
					node = 1 + (k/2)%(n-1)
				}
				d, err := clusterPrompt(c.clients[node], tracker, ws, sid)
				if err != nil {
					errs[p] = fmt.Errorf("prompt to node %d: %w", node+1, err)
					return
				}
				if node == 0 {
					own.Add(int64(d))
				} else {
					other.Add(int64(d))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			owner.Merge(&own)
			fwd.Merge(&other)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if n == 1 {
		res["cluster-accept-p50-"+cc.key] = float64(owner.Quantile(0.50))
		res["cluster-accept-p99-"+cc.key] = float64(owner.Quantile(0.99))
		return nil
	}
	res["cluster-accept-p50-owner"] = float64(owner.Quantile(0.50))
	res["cluster-accept-p99-owner"] = float64(owner.Quantile(0.99))
	res["cluster-accept-p50-fwd"] = float64(fwd.Quantile(0.50))
	res["cluster-accept-p99-fwd"] = float64(fwd.Quantile(0.99))
	return nil
}

// clusterPrompt posts a fast prompt (on a new session when sid is empty)
// through cl, waits for its run to complete and returns how long the POST
// took to be accepted.
func clusterPrompt(cl *client, tracker *runs, ws, sid string) (time.Duration, error) {
	if sid == "" {
		var err error
		if sid, err = cl.session(ws); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	id, err := cl.prompt(ws, sid, "fast")
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	_, _, err = tracker.wait(ctx, id)
	return took, err
}

// clusterDelivery streams -cluster-deltas stamped deltas on a session of
// the owner and records their delivery to every reader.
func clusterDelivery(cfg config, c *cluster, tracker *runs, ws string, readers []*reader, reading *sync.WaitGroup, remote int, key string, res result) error {
	sid, err := c.clients[0].session(ws)
	if err != nil {
		return err
	}
	cpu := c.cpu()
	id, err := c.clients[0].prompt(ws, sid, fmt.Sprintf("paced %d %s", *clusterDeltas, cfg.gap))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	if _, _, err := tracker.wait(ctx, id); err != nil {
		return err
	}
	for _, rd := range readers {
		for rd.n.Load() < int64(*clusterDeltas) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("a client got %d of %d deltas: %w", rd.n.Load(), *clusterDeltas, errTimeout)
			case <-time.After(time.Millisecond):
			}
		}
	}
	res["cluster-cpu-"+key] = float64((c.cpu() - cpu).Microseconds()) / float64(*clusterDeltas*len(readers))
	// The readers' histograms are theirs until they end: end them.
	for _, rd := range readers {
		rd.s.conn.Close()
	}
	reading.Wait()
	var everyone, others benchkit.Hist
	for i, rd := range readers {
		everyone.Merge(&rd.hist)
		if i >= remote {
			others.Merge(&rd.hist)
		}
	}
	res["cluster-delta-p50-"+key] = float64(everyone.Quantile(0.50))
	res["cluster-delta-p99-"+key] = float64(everyone.Quantile(0.99))
	if remote < len(readers) {
		res["cluster-delta-p99-remote"] = float64(others.Quantile(0.99))
	}
	return nil
}
