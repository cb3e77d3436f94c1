package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tandem-dev/tandem/internal/bus/natsbus"
	"github.com/tandem-dev/tandem/internal/store/postgres"
)

// DefaultNodeID is the host name plus a random suffix, so two servers on
// one machine are two nodes.
func DefaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "tandem"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// joinCluster opens the cluster's store and bus.
func (s *Server) joinCluster(ctx context.Context) (*postgres.Fences, error) {
	cfg := s.cfg
	if cfg.StoreURL == "" || cfg.BusURL == "" {
		return nil, errors.New("a cluster needs both a store (--store postgres://HOST/DB) and a bus (--bus nats://HOST:PORT)")
	}
	if !strings.HasPrefix(cfg.StoreURL, "postgres://") && !strings.HasPrefix(cfg.StoreURL, "postgresql://") {
		return nil, errors.New("--store must be a postgres:// URL")
	}
	db, err := postgres.Open(ctx, cfg.StoreURL, postgres.Options{})
	if err != nil {
		return nil, err
	}
	nb, err := natsbus.Dial(natsbus.Config{URL: cfg.BusURL, Name: s.nodeID, Logger: cfg.Logger})
	if err != nil {
		db.Close()
		return nil, err
	}
	// Commands between nodes go on a connection of their own: a burst of
	// events never queues a prompt behind it. It keeps no reconnect
	// buffer: a command sent while the bus is away fails at once (the
	// client is told workspace_unavailable), where a buffered one would
	// reach the owner once the bus is back, after its sender gave up, and
	// run although the client was told it did not.
	nc, err := nats.Connect(cfg.BusURL, nats.Name(s.nodeID+"/forward"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		nb.Close()
		db.Close()
		return nil, fmt.Errorf("connect to the bus: %w", err)
	}
	s.bus, s.natsc = nb, nc
	return postgres.NewFences(db), nil
}

// leaveCluster hands this node's workspaces over and closes the bus.
func (s *Server) leaveCluster() {
	if s.node != nil {
		s.node.Close()
	}
	if s.natsc != nil {
		s.natsc.Close()
	}
	if s.bus != nil {
		s.bus.Close()
	}
}
