//go:build !unix

package main

// raiseFileLimit has nothing to raise where there is no RLIMIT_NOFILE.
func raiseFileLimit(need int) error { return nil }

// hardFileLimit is unknown where there is no RLIMIT_NOFILE.
func hardFileLimit() int { return 0 }
