// Command select_timeout waits for a slow worker with a select and a
// time.After timeout, then for a fast one that beats its timeout.
package main

import "time"

func reply(after time.Duration, out chan<- string) {
	time.Sleep(after)
	out <- "done"
}

func main() {
	slow := make(chan string, 1)
	go reply(50*time.Millisecond, slow)
	select {
	case <-slow:
		panic("slow worker was fast")
	case <-time.After(5 * time.Millisecond):
	}
	fast := make(chan string, 1)
	go reply(0, fast)
	select {
	case <-fast:
	case <-time.After(time.Second):
		panic("fast worker timed out")
	}
}
