package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Files of the data dir besides the database and the token.
const (
	// lockFile is held locked (flock, LockFileEx on Windows) by the one
	// server using the data dir. The kernel drops the lock when the process
	// dies, however it dies, which is what makes a server.json left by a
	// killed server recognisable as stale.
	lockFile = "server.lock"
	// infoFile says which process holds the lock and where it listens.
	infoFile = "server.json"
)

// lockRetry is how long OpenDataDir waits for a lock held by a process that
// has not (yet) said who it is: a server in its first milliseconds, or a
// client command checking whether a server.json is stale.
const lockRetry = time.Second

// ServerInfo is the content of DATA_DIR/server.json: how client commands
// find the server that holds the data dir.
type ServerInfo struct {
	// URL is where the server listens; empty until it accepts connections.
	URL string `json:"url"`
	PID int    `json:"pid"`
}

// InUseError is the error of OpenDataDir on a data dir another server holds.
type InUseError struct {
	Dir  string
	Info ServerInfo // zero when the holder did not say who it is
}

func (e *InUseError) Error() string {
	switch {
	case e.Info.PID == 0:
		return fmt.Sprintf("data dir %s is in use by another tandem process", e.Dir)
	case e.Info.URL == "":
		return fmt.Sprintf("data dir %s is in use by tandem pid %d (not listening yet)", e.Dir, e.Info.PID)
	}
	return fmt.Sprintf("data dir %s is in use by tandem pid %d at %s", e.Dir, e.Info.PID, e.Info.URL)
}

// DataDir is a data directory held by this process: while it is open no
// other tandem server (in this process or another) can open it, because two
// servers on one database would each recover the other's live runs and race
// for the same event seqs.
type DataDir struct {
	path string
	pid  int

	mu   sync.Mutex
	lock *os.File
	url  string
	// closing is set by Close; gone once the dir is another server's (its
	// server.json is then not ours to remove).
	closing, gone bool
	stop          chan struct{} // closed by Close to end Guard's watch
	done          chan struct{} // closed when the watch ended; nil without one
}

// OpenDataDir creates the data dir if needed (mode 0700, tightening an
// existing looser one), takes its lock and writes server.json with this
// process's pid. A dir another server holds is an *InUseError.
func OpenDataDir(path string) (*DataDir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", path, err)
	}
	if err := privateDir(abs); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(abs, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: open lock: %w", abs, err)
	}
	if err := os.Chmod(f.Name(), 0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("data dir %s: protect lock: %w", abs, err)
	}
	deadline := time.Now().Add(lockRetry)
	for {
		locked, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("data dir %s: lock: %w", abs, err)
		}
		if locked {
			break
		}
		info, _ := readInfo(abs)
		// A live holder that said who it is will not let go soon; anything
		// else may be a moment's hold.
		if (info.PID != 0 && processAlive(info.PID)) || time.Now().After(deadline) {
			f.Close()
			return nil, &InUseError{Dir: abs, Info: info}
		}
		time.Sleep(20 * time.Millisecond)
	}
	d := &DataDir{path: abs, lock: f, pid: os.Getpid(), stop: make(chan struct{})}
	if err := d.writeInfo(ServerInfo{PID: d.pid}); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Path is the data dir's absolute path.
func (d *DataDir) Path() string { return d.path }

// Publish records in server.json the URL the server listens on.
func (d *DataDir) Publish(url string) error {
	d.mu.Lock()
	d.url = url
	d.mu.Unlock()
	return d.writeInfo(ServerInfo{URL: url, PID: d.pid})
}

// guardEvery is how often Guard looks at the data dir: a dir emptied under
// the server is noticed within a second.
const guardEvery = 250 * time.Millisecond

// Guard watches the data dir until Close. When its lock file or server.json
// is gone (the dir was emptied or removed under the running server, as a
// test harness empties COPILOT_HOME between tests), it recreates the dir,
// takes a new lock and writes server.json and keep's files (name → content)
// back, so that other processes find this server and never start a second
// one on the dir. If another process took the recreated dir first, lost is
// called with why, and the watch ends: the server must stop. Guard is
// called at most once.
func (d *DataDir) Guard(keep map[string][]byte, logger *slog.Logger, lost func(error)) {
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		t := time.NewTicker(guardEvery)
		defer t.Stop()
		for {
			select {
			case <-d.stop:
				return
			case <-t.C:
			}
			if d.intact() {
				continue
			}
			if err := d.restore(keep); err != nil {
				lost(err)
				return
			}
			logger.Warn("the data dir was emptied or removed under the running server: its lock, server.json and token are back, so other processes find this server; "+
				"the database removed with them stays open, so the server keeps its data while it runs, but it will not survive a restart",
				"data_dir", d.path)
		}
	}()
}

// intact reports whether the lock file this process holds and server.json
// are still in the data dir.
func (d *DataDir) intact() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock == nil {
		return true // closing
	}
	held, err := d.lock.Stat()
	if err != nil {
		return false
	}
	there, err := os.Stat(filepath.Join(d.path, lockFile))
	if err != nil || !os.SameFile(held, there) {
		return false
	}
	_, err = os.Stat(filepath.Join(d.path, infoFile))
	return err == nil
}

// restore recreates what other processes need to find this server.
func (d *DataDir) restore(keep map[string][]byte) error {
	if err := privateDir(d.path); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(d.path, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("data dir %s: reopen lock: %w", d.path, err)
	}
	d.mu.Lock()
	if d.lock == nil {
		d.mu.Unlock()
		f.Close()
		return nil
	}
	if held, err := d.lock.Stat(); err == nil {
		if fi, err := f.Stat(); err == nil && os.SameFile(held, fi) {
			f.Close() // the lock is ours still: only server.json went
			f = nil
		}
	}
	if f != nil {
		locked, err := tryLock(f)
		if err != nil || !locked {
			d.gone = true
			d.mu.Unlock()
			f.Close()
			info, _ := readInfo(d.path)
			if err == nil {
				err = &InUseError{Dir: d.path, Info: info}
			}
			return fmt.Errorf("the data dir was emptied under this server, and another process took it (%w): this server stops, so that one server owns the data dir", err)
		}
		old := d.lock
		d.lock = f
		old.Close()
	}
	url := d.url
	d.mu.Unlock()
	for name, content := range keep {
		p := filepath.Join(d.path, name)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			if err := os.WriteFile(p, content, 0o600); err != nil {
				return fmt.Errorf("data dir %s: restore %s: %w", d.path, name, err)
			}
		}
	}
	return d.writeInfo(ServerInfo{URL: url, PID: d.pid})
}

// Close removes server.json and releases the lock.
func (d *DataDir) Close() error {
	d.mu.Lock()
	if d.lock == nil || d.closing {
		d.mu.Unlock()
		return nil
	}
	d.closing = true
	close(d.stop)
	d.mu.Unlock()
	if d.done != nil {
		<-d.done
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var err error
	if !d.gone {
		err = os.Remove(filepath.Join(d.path, infoFile))
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	// Closing the file releases the lock (flock and LockFileEx alike).
	err = errors.Join(err, d.lock.Close())
	d.lock = nil
	return err
}

// writeInfo replaces server.json atomically, so a reader never sees half of it.
func (d *DataDir) writeInfo(info ServerInfo) error {
	raw, err := json.Marshal(info)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(d.path, infoFile+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", infoFile, err)
	}
	_, err = tmp.Write(append(raw, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// CreateTemp makes the file 0600 already; say it where it matters.
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(d.path, infoFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", infoFile, err)
	}
	return nil
}

// readInfo reads dir's server.json; a missing or garbled file is a zero
// ServerInfo and an error.
func readInfo(dir string) (ServerInfo, error) {
	raw, err := os.ReadFile(filepath.Join(dir, infoFile))
	if err != nil {
		return ServerInfo{}, err
	}
	var info ServerInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return ServerInfo{}, fmt.Errorf("%s: %w", infoFile, err)
	}
	return info, nil
}

// RunningServer reports the server that holds dataDir, from its server.json.
// A server.json left by a server that was killed does not count: its lock
// went with its process. ok is false when no server holds the dir; a server
// still starting is waited for (up to wait) until it says where it listens.
func RunningServer(dataDir string, wait time.Duration) (info ServerInfo, ok bool, err error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return ServerInfo{}, false, err
	}
	if _, err := os.Stat(filepath.Join(dir, infoFile)); errors.Is(err, fs.ErrNotExist) {
		return ServerInfo{}, false, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return ServerInfo{}, false, nil
	}
	if err != nil {
		return ServerInfo{}, false, fmt.Errorf("data dir %s: open lock: %w", dir, err)
	}
	locked, err := tryLock(f)
	// Closing releases a lock this check took: it was only a question.
	f.Close()
	if err != nil {
		return ServerInfo{}, false, fmt.Errorf("data dir %s: lock: %w", dir, err)
	}
	if locked {
		return ServerInfo{}, false, nil
	}
	deadline := time.Now().Add(wait)
	for {
		info, err := readInfo(dir)
		if err == nil && info.URL != "" {
			return info, true, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return ServerInfo{}, false, fmt.Errorf("data dir %s is in use, but: %w", dir, err)
			}
			return info, false, &InUseError{Dir: dir, Info: info}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// privateDir creates dir with mode 0700, or tightens it to 0700: it holds
// the token and every session's transcript.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("protect data dir: %w", err)
	}
	return nil
}
