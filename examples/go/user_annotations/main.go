// Command user_annotations marks its own progress with runtime/trace user
// annotations: main logs before it waits, a worker logs inside a region, and
// each result is logged as it arrives. The harness keeps them as UserLog and
// UserRegion events of the program's goroutines.
package main

import (
	"context"
	"fmt"
	"runtime/trace"
)

func work(ctx context.Context, id int, out chan<- int) {
	trace.WithRegion(ctx, "square", func() {
		trace.Log(ctx, "worker", fmt.Sprint("start ", id))
		out <- id * id
	})
}

func main() {
	ctx := context.Background()
	out := make(chan int)
	for id := 1; id <= 2; id++ {
		go work(ctx, id, out)
	}
	trace.Log(ctx, "main", "waiting for 2 results")
	sum := 0
	for range 2 {
		v := <-out
		trace.Log(ctx, "result", fmt.Sprint(v))
		sum += v
	}
	fmt.Println(sum)
}
