// Package natstest runs a NATS server with JetStream inside a test
// process, for the tests of the cluster's bus and of clusters.
package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"
)

// Start runs a NATS server with JetStream on a free loopback port; it
// stops when the test ends.
func Start(t testing.TB) *server.Server { return StartOn(t, 0) }

// StartOn is Start on a given port (0 picks a free one): a test that
// restarts "the" server starts a new one where the old one was. Its
// JetStream state starts empty, as a restarted server's memory streams do.
func StartOn(t testing.TB, port int) *server.Server {
	t.Helper()
	if port == 0 {
		port = -1
	}
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Port is the server's client port.
func Port(s *server.Server) int { return s.Addr().(*net.TCPAddr).Port }

// IgnoreConsumers are goleak options for the goroutines of the server's
// consumers: a consumer a node deleted as it closed ends them on the
// server's own time, after the node's Close has returned. They are the
// server's, not the node's.
func IgnoreConsumers() []goleak.Option {
	const c = "github.com/nats-io/nats-server/v2/server.(*consumer)."
	return []goleak.Option{
		goleak.IgnoreTopFunction(c + "loopAndGatherMsgs"),
		goleak.IgnoreTopFunction(c + "processInboundAcks"),
		goleak.IgnoreTopFunction(c + "processInboundNextMsgReqs"),
	}
}
