// Command user_annotations marks its own progress with runtime/trace user
// annotations: main logs before it waits, a worker logs inside a region, and
// each result is logged as it arrives. The harness keeps them as UserLog and
// UserRegion events of the program's goroutines. Main waits for the workers
// to return, so every region's end is in the trace.
package main

import (
	"context"
	"fmt"
	"runtime/trace"
	"sync"
)

func work(ctx context.Context, id int, out chan<- int, wg *sync.WaitGroup) {
	defer wg.Done()
	trace.WithRegion(ctx, "square", func() {
		trace.Log(ctx, "worker", fmt.Sprint("start ", id))
		out <- id * id
	})
}

func main() {
	ctx := context.Background()
	out := make(chan int)
	var wg sync.WaitGroup
	for id := 1; id <= 2; id++ {
		wg.Add(1)
		go work(ctx, id, out, &wg)
	}
	trace.Log(ctx, "main", "waiting for 2 results")
	sum := 0
	for range 2 {
		v := <-out
		trace.Log(ctx, "result", fmt.Sprint(v))
		sum += v
	}
	wg.Wait()
	fmt.Println(sum)
}
