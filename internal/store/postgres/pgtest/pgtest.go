// Package pgtest gives tests PostgreSQL databases.
//
// The server is the one TANDEM_TEST_POSTGRES names (a URL whose role may
// create databases) or, when that is unset, a throwaway server this package
// starts from the PostgreSQL binaries it finds (Debian's
// /usr/lib/postgresql/*/bin first, then PATH): initdb into a temporary
// directory, then postgres on a free loopback port. PostgreSQL refuses to
// run as root, so under root the server runs as the unprivileged user
// "nobody", its directory handed to that user. The server is started on
// the first Database call and stopped by Main after the package's tests.
//
// When no server can be had, Database fails the test, saying how to get
// one: a test that needs PostgreSQL never skips.
//
// Each Database call creates a database of its own, dropped when the test
// ends, so tests share nothing and may run in parallel.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable that points the tests at an existing server.
const EnvURL = "TANDEM_TEST_POSTGRES"

// shared is the server of this test binary: started once, on first use,
// and stopped by Main.
var shared struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// Main runs the package's tests and then stops the throwaway server if
// one was started. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop server: %v\n", err)
		}
		shared.srv = nil
	}
	return code
}

// Database creates an empty database for t and returns its URL. The
// database is dropped, with any connection left to it, when t ends.
func Database(t testing.TB) string {
	t.Helper()
	srv, err := server()
	if err != nil {
		t.Fatalf("pgtest: no PostgreSQL server for this test: %v\n"+
			"Set %s to the URL of a server whose role may create databases, "+
			"or install PostgreSQL (Debian: apt-get install postgresql) so the tests can start one.", err, EnvURL)
	}
	u, err := srv.CreateDatabase(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if srv.cmd != nil {
			// A throwaway server drops its databases in the background,
			// so tests do not wait for it; Stop waits for the drops.
			srv.drops.Go(func() { _ = srv.DropDatabase(context.Background(), u) })
			return
		}
		if err := srv.DropDatabase(context.Background(), u); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return u
}

func server() (*Server, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = Start()
	}
	return shared.srv, shared.err
}

// Server is a PostgreSQL server that tests create databases on.
type Server struct {
	// URL is the server's admin URL (its database is "postgres").
	URL string

	cmd   *exec.Cmd // nil for a server we did not start
	dir   string
	done  chan struct{} // closed when cmd has exited
	log   string
	drops sync.WaitGroup
}

// Start returns the server TANDEM_TEST_POSTGRES names, or starts a
// throwaway one.
func Start() (*Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		srv := &Server{URL: u}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ping(ctx, u); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvURL, err)
		}
		return srv, nil
	}
	return startLocal()
}

// binDir finds the directory of initdb and postgres: Debian's newest
// version, else whatever PATH has.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "postgres")) && isExec(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	pg, err := exec.LookPath("postgres")
	if err == nil {
		d := filepath.Dir(pg)
		if isExec(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL binaries (initdb, postgres) in /usr/lib/postgresql/*/bin or PATH")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// runAs is the unprivileged user the server runs as when we are root.
type runAs struct{ uid, gid int }

// startLocal runs initdb and postgres in a new temporary directory.
func startLocal() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tandem-pgtest-")
	if err != nil {
		return nil, err
	}
	srv := &Server{dir: dir, log: filepath.Join(dir, "postgres.log")}
	ok := false
	defer func() {
		if !ok {
			_ = srv.Stop()
		}
	}()
	password := randomHex(16)
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		for _, p := range []string{dir, pwfile} {
			if err := os.Chown(p, cred.uid, cred.gid); err != nil {
				return nil, fmt.Errorf("hand %s to the unprivileged user: %w", p, err)
			}
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"),
		"-D", data, "-U", "tandem", "--pwfile", pwfile, "--auth", "scram-sha-256",
		"-E", "UTF8", "--locale", "C", "--no-sync")
	initdb.SysProcAttr = procAttr(cred, false)
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := os.Remove(pwfile); err != nil {
		return nil, err
	}

	// The port is free when we look; another process may take it before
	// postgres binds it, so a failed start tries another.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		err = srv.run(bin, data, port, cred)
		if err == nil {
			srv.URL = fmt.Sprintf("postgres://tandem:%s@127.0.0.1:%d/postgres?sslmode=disable", password, port)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = srv.waitReady(ctx)
			cancel()
			if err == nil {
				ok = true
				return srv, nil
			}
		}
		if attempt == 2 {
			return nil, err
		}
		srv.kill()
	}
}

// run starts postgres on port. It keeps PostgreSQL's durable defaults
// (fsync, synchronous commits), so what tests and benchmarks measure is
// what a real server costs.
func (s *Server) run(bin, data string, port int, cred *runAs) error {
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	if cred != nil {
		if err := os.Chown(s.log, cred.uid, cred.gid); err != nil {
			return err
		}
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+s.dir,
		"-c", "max_connections=300",
		"-c", "shared_buffers=64MB",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.dir
	// A test binary that dies leaves no server behind.
	cmd.SysProcAttr = procAttr(cred, true)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.cmd = cmd
	s.done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	return nil
}

func (s *Server) waitReady(ctx context.Context) error {
	for {
		err := ping(ctx, s.URL)
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("postgres exited: %s", s.tail())
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready: %w: %s", err, s.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) tail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func ping(ctx context.Context, u string) error {
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.Ping(ctx)
}

// kill stops a postgres that failed to start.
func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Stop shuts a server we started down (fast shutdown: clients are
// disconnected) and removes its directory. A server from
// TANDEM_TEST_POSTGRES is left as it was.
func (s *Server) Stop() error {
	var err error
	s.drops.Wait()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			err = errors.New("postgres did not stop within 10s; killed")
		}
		s.cmd = nil
	}
	if s.dir != "" {
		err = errors.Join(err, os.RemoveAll(s.dir))
	}
	return err
}

// CreateDatabase creates a database with a random name and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := "tandem_test_" + randomHex(8)
	if err := s.admin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// DropDatabase drops the database of u, closing its connections.
func (s *Server) DropDatabase(ctx context.Context, u string) error {
	pu, err := url.Parse(u)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(pu.Path, "/")
	if err := s.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

func (s *Server) admin(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql)
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
