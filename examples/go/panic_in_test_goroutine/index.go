// Package index looks values up from a worker goroutine.
package index

// Lookup asks a worker goroutine for xs[i]; an out-of-range index makes the
// worker panic, which kills the test binary.
func Lookup(xs []int, i int) int {
	out := make(chan int)
	go func() { out <- xs[i] }()
	return <-out
}
