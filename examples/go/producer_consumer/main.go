// Command producer_consumer passes items from one producer to one consumer
// over a small buffered channel.
package main

func produce(out chan<- int, n int) {
	for i := 0; i < n; i++ {
		out <- i * i
	}
	close(out)
}

func consume(in <-chan int, done chan<- int) {
	sum := 0
	for v := range in {
		sum += v
	}
	done <- sum
}

func main() {
	items := make(chan int, 2)
	done := make(chan int)
	go produce(items, 10)
	go consume(items, done)
	if got := <-done; got != 285 {
		panic("wrong sum")
	}
}
