//go:build !linux

package main

// stopWithGoRun does nothing where the kernel has no parent-death signal:
// after a kill -9 of `go run`, stop the orphaned relais yourself (the next
// start says which process holds the port or the data directory).
func stopWithGoRun() {}
