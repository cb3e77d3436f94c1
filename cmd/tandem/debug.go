package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"
)

// startDebug serves the Go runtime's profiles (net/http/pprof: CPU, heap,
// goroutines, mutex and block profiles, execution traces) on addr, a
// listener of its own apart from the API's. It is off unless asked for
// (--debug-addr, TANDEM_DEBUG_ADDR), and it has no token: it only listens
// on loopback. Mutex and block profiling, which cost a little on every
// contended lock, are switched on with it only. The command line is not
// served: it may hold a secret (a --token flag) that other local users must
// not read.
func startDebug(addr string, log *slog.Logger) (stop func(), err error) {
	loopback, err := isLoopback(addr)
	if err != nil {
		return nil, err
	}
	if !loopback {
		return nil, fmt.Errorf("--debug-addr %s: the profiles are served without a token, so only on loopback", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-addr: %w", err)
	}
	runtime.SetMutexProfileFraction(10)
	runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("debug listener", "err", err)
		}
	}()
	log.Info("serving runtime profiles", "addr", ln.Addr().String())
	return func() { srv.Close(); <-done }, nil
}
