// Package stages has two small channel-based helpers, each with its own test.
package stages

// Doubler doubles every value it receives until in is closed.
func Doubler(in <-chan int) <-chan int {
	out := make(chan int)
	go func() {
		defer close(out)
		for v := range in {
			out <- 2 * v
		}
	}()
	return out
}

// Race returns the value of whichever of the two functions finishes first.
func Race(f, g func() int) int {
	out := make(chan int, 2)
	go func() { out <- f() }()
	go func() { out <- g() }()
	return <-out
}
