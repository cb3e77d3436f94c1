//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/tandem-dev/tandem/internal/procgroup"
)

// minABI is the oldest Landlock ABI that confines what section 12 asks:
// files (1-3), TCP bind and connect (4), device ioctls (5), signals and
// abstract Unix sockets scoped to the command's own tree (6).
const minABI = 6

// Exit status of the helper when it could not confine itself: the command
// did not run. 125 is what env(1) and similar wrappers use for their own
// failures, so that it is not mistaken for the command's.
const exitSetup = 125

// prepare makes the helper the first process of new mount and PID
// namespaces (and, for a server that is not root, a user namespace in
// which it may mount): its own /proc shows only its own tree, its mounts
// (the read-only .tandem) are its own, and when it exits the kernel kills
// every process left in its tree, however it detached itself.
func prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	flags := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_NEWPID)
	if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
		flags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
		// Kept across the helper's exec (its uid is not 0 in the
		// namespace), so that it may mount; dropped before the command.
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
	}
	cmd.SysProcAttr.Cloneflags = flags
}

// probe runs the helper in probe mode under a throwaway spec: it passes
// only when every step a command's confinement takes works here.
func (l *Launcher) probe(ctx context.Context) Status {
	abi := landlockABI()
	if abi < minABI {
		return Status{Mechanism: "none", Reason: noLandlock(abi)}
	}
	dir, err := os.MkdirTemp("", "tandem-sandbox-probe-")
	if err != nil {
		return Status{Mechanism: "none", Reason: fmt.Sprintf("making the probe's directory: %v", err)}
	}
	defer os.RemoveAll(dir)
	spec := Spec{Root: dir, Tmp: dir, Settings: Settings{Mode: ModeWorkspace}}
	raw, _ := json.Marshal(spec)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.exe, HelperCommand, string(raw), ProbeArg)
	cmd.Env = os.Environ()
	prepare(cmd)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out.String()), "tandem sandbox: "))
		if msg == "" {
			msg = err.Error()
		}
		return Status{Mechanism: "none", Reason: msg}
	}
	return Status{Available: true, Mechanism: fmt.Sprintf("landlock-abi%d+seccomp+namespaces", abi)}
}

func noLandlock(abi int) string {
	if abi <= 0 {
		return fmt.Sprintf("Landlock ABI %d or later is missing: this kernel has no Landlock, or it is not enabled (lsm=landlock)", minABI)
	}
	return fmt.Sprintf("Landlock ABI %d or later is missing: this kernel has ABI %d", minABI, abi)
}

// landlockABI is the kernel's Landlock ABI; 0 when it has none, or when
// NoLandlockEnv says to act as if.
func landlockABI() int {
	if os.Getenv(NoLandlockEnv) == "1" {
		return 0
	}
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Main is the helper: `tandem sandbox-exec --wait` reads the command it
// is to become from descriptor 3 (with its standard descriptors), confines
// itself as the command's spec says, then executes it, which with all it
// starts stays confined; `tandem sandbox-exec SPEC --probe` confines
// itself and exits 0. Main returns only on failure, with the exit status
// to exit with, having said why on stderr.
func Main(args []string, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "tandem sandbox: "+format+"\n", a...)
		return exitSetup
	}
	// Capabilities, no_new_privs and the securebits are a thread's: the
	// thread that drops them is the one that executes the program.
	runtime.LockOSThread()
	switch {
	case len(args) == 1 && args[0] == WaitArg:
	case len(args) == 2 && args[1] == ProbeArg:
		var spec Spec
		if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
			return fail("reading the policy: %v", err)
		}
		if err := confine(spec); err != nil {
			return fail("%v; the command did not run", err)
		}
		return 0
	default:
		return fail("usage: tandem %s %s", HelperCommand, WaitArg)
	}
	req, ok, err := receive()
	if !ok {
		return 0 // the server stopped waiting for this helper
	}
	if err != nil {
		return fail("%v; the command did not run", err)
	}
	if req.Dir != "" {
		if err := os.Chdir(req.Dir); err != nil {
			return fail("%v; the command did not run", err)
		}
	}
	if err := confine(req.Spec); err != nil {
		return fail("%v; the command did not run", err)
	}
	if len(req.Argv) == 0 {
		return fail("no command")
	}
	path, err := lookPath(req.Argv[0], req.Env)
	if err != nil {
		return fail("%v", err)
	}
	err = syscall.Exec(path, req.Argv, req.Env)
	return fail("executing %s: %v", req.Argv[0], err)
}

// maxRequest bounds a request's size (its environment, mostly).
const maxRequest = 16 << 20

// receive reads the request from descriptor 3: a 4-byte length carrying
// the command's stdin, stdout and stderr, which become this process's,
// then the request's JSON. ok is false when the server closed its end
// without sending one.
func receive() (req request, ok bool, err error) {
	conn := os.NewFile(3, "sandbox-request")
	defer conn.Close()
	// Ready: the launcher hands out only helpers that got this far.
	if _, err := conn.Write([]byte{1}); err != nil {
		return req, false, nil
	}
	hdr := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, _, _, err := unix.Recvmsg(3, hdr, oob, 0)
	if err != nil {
		return req, true, fmt.Errorf("reading the command: %w", err)
	}
	if n == 0 {
		return req, false, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return req, true, fmt.Errorf("reading the command's descriptors: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 3 {
		return req, true, fmt.Errorf("reading the command's descriptors: %v (%d)", err, len(fds))
	}
	for i, fd := range fds {
		if err := unix.Dup3(fd, i, 0); err != nil {
			return req, true, fmt.Errorf("taking descriptor %d: %w", i, err)
		}
		unix.Close(fd)
	}
	if n < len(hdr) {
		if _, err := io.ReadFull(conn, hdr[n:]); err != nil {
			return req, true, fmt.Errorf("reading the command: %w", err)
		}
	}
	size := binary.BigEndian.Uint32(hdr)
	if size > maxRequest {
		return req, true, fmt.Errorf("the command's request is %d bytes, more than %d", size, maxRequest)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(conn, body); err != nil {
		return req, true, fmt.Errorf("reading the command: %w", err)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return req, true, fmt.Errorf("reading the command: %w", err)
	}
	return req, true, nil
}

// lookPath finds name as a shell would with env's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: command not found", name)
}

// helper is a helper started ahead, waiting for its command on conn.
type helper struct {
	cmd  *exec.Cmd
	conn *os.File
}

// spawn starts a helper in its own namespaces and process group, waiting.
func (l *Launcher) spawn() (*helper, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("starting the sandbox helper: %w", err)
	}
	// Ours non-blocking, so that a read of it can be interrupted by
	// closing it (Launcher.Close while a helper starts).
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("starting the sandbox helper: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "sandbox-helper"), os.NewFile(uintptr(fds[1]), "sandbox-helper")
	cmd := exec.Command(l.exe, HelperCommand, WaitArg)
	// It runs the command with the command's environment; its own needs
	// nothing of the server's.
	// GOMAXPROCS=1: few threads, which the exec must each wait to end.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GOMAXPROCS=1"}
	if v := os.Getenv(NoLandlockEnv); v != "" {
		cmd.Env = append(cmd.Env, NoLandlockEnv+"="+v)
	}
	cmd.ExtraFiles = []*os.File{theirs}
	prepare(cmd)
	procgroup.Prepare(cmd)
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("starting the sandbox helper: %w", err)
	}
	return &helper{cmd: cmd, conn: ours}, nil
}

// ready waits until the helper is ready (the runtime and every package
// initialized), so that a command taking it waits for none of that.
func (h *helper) ready() error {
	if _, err := io.ReadFull(h.conn, make([]byte, 1)); err != nil {
		return fmt.Errorf("starting the sandbox helper: it was not ready: %w", err)
	}
	return nil
}

// interrupt ends a wait in ready.
func (h *helper) interrupt() { h.conn.Close() }

// discard stops a helper that was never sent a command.
func (h *helper) discard() {
	_ = h.cmd.Process.Kill()
	h.conn.Close()
	_ = h.cmd.Wait()
}

// send gives the helper its command and stdio.
func (h *helper) send(req request, stdio Stdio) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode the command for the sandbox: %w", err)
	}
	fds := make([]int, 3)
	for i, f := range stdio {
		if f == nil {
			null, err := os.Open(os.DevNull)
			if err != nil {
				return err
			}
			defer null.Close()
			f = null
		}
		fds[i] = int(f.Fd())
	}
	hdr := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	raw, err := h.conn.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	if err := raw.Write(func(fd uintptr) bool {
		sendErr = unix.Sendmsg(int(fd), hdr, unix.UnixRights(fds...), nil, 0)
		return sendErr != unix.EAGAIN
	}); err != nil {
		return err
	}
	if sendErr != nil {
		return fmt.Errorf("sending the command to the sandbox helper: %w", sendErr)
	}
	if _, err := h.conn.Write(body); err != nil {
		return fmt.Errorf("sending the command to the sandbox helper: %w", err)
	}
	return nil
}

// startConfined has a helper confine itself and become the command.
func (l *Launcher) startConfined(req request, stdio Stdio) (*exec.Cmd, error) {
	var err error
	for range 2 { // a waiting helper may have died meanwhile: then a new one
		var h *helper
		if h, err = l.take(); err != nil {
			return nil, err
		}
		err = h.send(req, stdio)
		h.conn.Close()
		if err == nil {
			return h.cmd, nil
		}
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
	}
	return nil, err
}

// confine applies spec to this process: its mounts, then Landlock, then
// seccomp, then drops every capability.
func confine(spec Spec) error {
	spec.Settings = spec.Settings.Normal()
	abi := landlockABI()
	if abi < minABI {
		return errors.New(noLandlock(abi))
	}
	if os.Getpid() != 1 {
		return errors.New("the helper is not the first process of its own PID namespace")
	}
	if err := mounts(spec); err != nil {
		return err
	}
	if err := lockCapabilities(); err != nil {
		return err
	}
	if err := restrictLandlock(spec, abi); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := restrictSyscalls(spec, abi); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return dropCapabilities()
}

// mounts gives the helper its own /proc (only its tree's processes) and
// makes the workspace's .tandem read-only. Landlock cannot: its rules
// only add rights down a tree, so the workspace's read-write rule would
// reach .tandem too.
func mounts(spec Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc of the command's own PID namespace: %w", err)
	}
	if spec.Root == "" {
		return nil
	}
	dot := filepath.Join(spec.Root, ".tandem")
	fi, err := os.Lstat(dot)
	if errors.Is(err, os.ErrNotExist) {
		// Made now so that a command cannot make it (and in it a
		// configuration of its own choosing).
		if err := os.Mkdir(dot, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("making the workspace's .tandem: %w", err)
		}
		fi, err = os.Lstat(dot)
	}
	if err != nil {
		return fmt.Errorf("the workspace's .tandem: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the workspace's .tandem is not a directory (%s)", fi.Mode().Type())
	}
	return readOnlyBind(dot)
}

// readOnlyBind mounts dir read-only over itself, keeping the flags its
// mount has (which, in a user namespace, may not be cleared).
func readOnlyBind(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %w", dir, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	if err := unix.Mount("", dir, "", flags, ""); err != nil {
		return fmt.Errorf("making %s read-only: %w", dir, err)
	}
	return nil
}

// systemDirs are read (and executed from), never written.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt", "/proc", "/sys"}

// devices are the character devices commands read and write.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// terminals are the devices of terminals, which also need their ioctls.
var terminals = []string{"/dev/tty", "/dev/ptmx"}

// allFS are the filesystem rights this library knows; BestEffort keeps
// those the kernel has.
const allFS = landlock.AccessFSSet(1<<17 - 1)

func restrictLandlock(spec Spec, abi int) error {
	handledFS := allFS
	cfg := landlock.Config{Scoped: ll.ScopeSignal}
	if spec.Network {
		// Reaching Unix sockets is part of the network setting.
		handledFS &^= ll.AccessFSResolveUnix
	} else {
		cfg.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP | ll.AccessNetBindUDP | ll.AccessNetConnectSendUDP
		cfg.Scoped |= ll.ScopeAbstractUnixSocket
	}
	cfg.HandledAccessFS = handledFS
	rw := func(paths ...string) landlock.FSRule {
		r := landlock.RWDirs(paths...).WithRefer()
		if !spec.Network && abi >= 9 {
			r = r.WithResolveUnix()
		}
		return r
	}
	rules := []landlock.Rule{
		landlock.RODirs(systemDirs...).IgnoreIfMissing(),
		landlock.RWFiles(devices...).IgnoreIfMissing(),
		landlock.RWFiles(terminals...).WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
		rw(spec.Tmp),
	}
	if spec.Mode == ModeReadOnly {
		rules = append(rules, landlock.RODirs(spec.Root))
	} else {
		rules = append(rules, rw(spec.Root))
	}
	if spec.Cache != "" {
		rules = append(rules, rw(spec.Cache))
	}
	for _, p := range spec.Toolchains {
		rules = append(rules, pathRule(p, false))
	}
	// A listed path is judged where it leads, and Landlock grants where it
	// leads: a path that goes through a symlink could be turned, by a
	// command that may write where the link is, into a grant of anything.
	// Only real paths are granted.
	for _, p := range spec.Read {
		if realPath(p) {
			rules = append(rules, pathRule(p, false))
		}
	}
	for _, p := range spec.Write {
		if realPath(p) {
			rules = append(rules, pathRule(p, true))
		}
	}
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return errors.New("the kernel restricts nothing of the policy")
	}
	defer unix.Close(fd)
	// This thread only: it is the one that executes the command, which
	// keeps its domain; the others run nothing but this program's runtime
	// until the exec ends them. Restricting every thread (libpsx on
	// kernels before ABI 8) waits for each to be scheduled, which on a
	// busy machine costs milliseconds a command would wait.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return ll.LandlockRestrictSelf(fd, flags)
}

// realPath reports whether p (cleaned) is the real path of what it names,
// no symlink on the way; a path that is not says so on stderr, where the
// command's output shows it.
func realPath(p string) bool {
	p = filepath.Clean(p)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return true // missing: IgnoreIfMissing leaves it out
	}
	if real != p {
		fmt.Fprintf(os.Stderr, "tandem sandbox: %s is not granted: it goes through a symlink (to %s); list the real path\n", p, real)
		return false
	}
	return true
}

// pathRule grants a configured path, a directory or a file, which may be
// missing.
func pathRule(p string, write bool) landlock.Rule {
	fi, err := os.Stat(p)
	dir := err != nil || fi.IsDir()
	switch {
	case write && dir:
		return landlock.RWDirs(p).WithRefer().IgnoreIfMissing()
	case write:
		return landlock.RWFiles(p).IgnoreIfMissing()
	case dir:
		return landlock.RODirs(p).IgnoreIfMissing()
	}
	return landlock.ROFiles(p).IgnoreIfMissing()
}

// denied is the answer of a refused system call: EACCES, as Landlock
// refuses the rest.
const denied = seccomp.ActionErrno | seccomp.Action(unix.EACCES)

// restrictSyscalls closes what Landlock does not see. Always: io_uring,
// whose operations would bypass the filter below. Without the network:
// sockets of any family but Unix and netlink (a listen() binds an unbound
// TCP socket without the bind() Landlock sees, and MPTCP escapes it
// altogether), Unix datagram sockets (sent to by name, with no connect),
// and, before Landlock ABI 9 (which judges a named Unix socket by its
// path), every connect(): a named socket outside the workspace
// (docker.sock, an SSH agent) cannot be told from one inside by its
// arguments.
func restrictSyscalls(spec Spec, abi int) error {
	groups := []seccomp.SyscallGroup{{
		Names:  []string{"io_uring_setup", "io_uring_enter", "io_uring_register"},
		Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS),
	}}
	if !spec.Network {
		socket := []seccomp.ArgumentConditions{
			{
				{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX},
				{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_NETLINK},
			},
			{
				{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_UNIX},
				{Argument: 1, Operation: seccomp.BitsSet, Value: unix.SOCK_DGRAM},
			},
		}
		g := seccomp.SyscallGroup{
			NamesWithCondtions: []seccomp.NameWithConditions{{Name: "socket", Conditions: socket[0]}, {Name: "socket", Conditions: socket[1]}},
			Action:             denied,
		}
		if abi < 9 {
			g.Names = []string{"connect"}
		}
		groups = append(groups, g)
	}
	return seccomp.LoadFilter(seccomp.Filter{
		NoNewPrivs: true, // this thread's, as for Landlock: the one that executes
		Policy:     seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups},
	})
}

// lockCapabilities keeps a root server's commands from ever holding a
// capability again: no capability survives an exec of any program,
// setuid-root ones included, and none stays in the bounding set.
func lockCapabilities() error {
	const bits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 // NOROOT, NO_SETUID_FIXUP, KEEP_CAPS, NO_CAP_AMBIENT_RAISE, each locked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("securebits: %w", err)
	}
	last := 63
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// dropCapabilities empties this thread's capability sets and checks that
// nothing is left.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("dropping capabilities: %w", err)
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("reading capabilities: %w", err)
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return errors.New("capabilities are left after dropping them")
		}
	}
	for c := 0; c <= 40; c++ {
		if v, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && v == 1 {
			return fmt.Errorf("capability %d is left in the bounding set", c)
		}
	}
	return nil
}
