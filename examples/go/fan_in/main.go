// Command fan_in merges three producers into one channel with one forwarding
// goroutine per producer, closing the merged channel when all are drained.
package main

import "sync"

func count(from, n int) <-chan int {
	out := make(chan int)
	go func() {
		for i := from; i < from+n; i++ {
			out <- i
		}
		close(out)
	}()
	return out
}

func merge(ins ...<-chan int) <-chan int {
	out := make(chan int)
	var wg sync.WaitGroup
	for _, in := range ins {
		wg.Add(1)
		go func(in <-chan int) {
			defer wg.Done()
			for v := range in {
				out <- v
			}
		}(in)
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return out
}

func main() {
	sum := 0
	for v := range merge(count(0, 3), count(10, 3), count(20, 3)) {
		sum += v
	}
	if sum != 99 {
		panic("bad sum")
	}
}
