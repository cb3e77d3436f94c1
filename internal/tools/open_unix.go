//go:build unix

package tools

import "syscall"

// openNonblock keeps an open of a FIFO from blocking; on a regular file or a
// directory it changes nothing.
const openNonblock = syscall.O_NONBLOCK
