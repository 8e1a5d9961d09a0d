// Command object_states walks through the objects whose state the harness
// logs (go_harness/README.md, "Object operations"), each phase built so the
// blocking it shows happens in practically every run: a buffered channel
// that fills, a mutex contended by three goroutines, a WaitGroup waited on,
// and a select over two channels of which only the second gets a value.
package main

import (
	"sync"
	"time"
)

func fill() {
	buf := make(chan int, 2)
	go func() {
		time.Sleep(20 * time.Millisecond) // the receiver starts late: the third send waits
		for range 3 {
			<-buf
		}
	}()
	for i := range 3 {
		buf <- i
	}
}

func contend() {
	var mu sync.Mutex
	var wg sync.WaitGroup
	mu.Lock()
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			time.Sleep(time.Millisecond)
			mu.Unlock()
		}()
	}
	time.Sleep(10 * time.Millisecond) // the three wait for main's lock
	mu.Unlock()
	wg.Wait()
}

func choose() int {
	a := make(chan int)
	b := make(chan int, 1)
	go func() {
		time.Sleep(5 * time.Millisecond)
		b <- 2
	}()
	select {
	case v := <-a:
		return v
	case v := <-b:
		return v
	}
}

func main() {
	fill()
	contend()
	if choose() != 2 {
		panic("wrong case")
	}
}
