//go:build !unix

package tools

// openNonblock is not needed where opening a file cannot block on a FIFO.
const openNonblock = 0
