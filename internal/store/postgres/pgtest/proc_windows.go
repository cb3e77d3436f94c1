package pgtest

import "syscall"

func credential() (*runAs, error) { return nil, nil }

func procAttr(*runAs, bool) *syscall.SysProcAttr { return nil }
