// afterfunc_callback: a time.AfterFunc callback that exchanges values with
// main over channels. No program goroutine starts the callback's goroutine:
// the runtime does, from whatever thread runs the timer when it fires, so
// the harness keys it by its start function (a root-level gpath, see
// go_harness/README.md) rather than as a child of main.
package main

import (
	"fmt"
	"time"
)

func main() {
	ping := make(chan int)
	pong := make(chan int)
	done := make(chan struct{})
	time.AfterFunc(2*time.Millisecond, func() {
		for v := range ping { // main's three values, then the close
			pong <- v * 10
		}
		close(done)
	})
	sum := 0
	for i := 1; i <= 3; i++ {
		ping <- i // blocks until the callback runs
		sum += <-pong
	}
	close(ping)
	<-done
	fmt.Println("sum", sum)
}
