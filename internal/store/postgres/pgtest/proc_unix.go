//go:build unix

package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// credential is who the server runs as: this user (nil), or "nobody"
// under root, since PostgreSQL refuses to run as root.
func credential() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("running as root, which PostgreSQL refuses, and no user nobody to run it as: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user nobody: %w", err)
	}
	return &runAs{uid: uid, gid: gid}, nil
}

func procAttr(cred *runAs, dieWithParent bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if cred != nil {
		a.Credential = &syscall.Credential{Uid: uint32(cred.uid), Gid: uint32(cred.gid)}
	}
	if dieWithParent {
		setDeathSignal(a)
	}
	return a
}
