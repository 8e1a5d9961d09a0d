// Command context_cancel starts workers that loop until their context is
// cancelled; main cancels after collecting a few results.
package main

import (
	"context"
	"sync"
)

func worker(ctx context.Context, id int, out chan<- int, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case out <- id:
		}
	}
}

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan int)
	var wg sync.WaitGroup
	for id := 0; id < 3; id++ {
		wg.Add(1)
		go worker(ctx, id, out, &wg)
	}
	for i := 0; i < 5; i++ {
		<-out
	}
	cancel()
	wg.Wait()
}
