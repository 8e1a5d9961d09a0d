// Command goroutine_panic hands a value to a worker goroutine that panics
// on it while main waits for a reply that never comes.
package main

func divide(in <-chan int, out chan<- int) {
	d := <-in
	out <- 100 / d
}

func main() {
	in := make(chan int)
	out := make(chan int)
	go divide(in, out)
	var zero int
	in <- zero
	<-out
}
