// Command handoff_race lets four goroutines compete to hand tokens to main
// over one unbuffered channel, yielding between sends, so the order in
// which the senders are served varies from run to run.
package main

import "runtime"

func sender(id int, out chan<- int) {
	for i := 0; i < 3; i++ {
		runtime.Gosched()
		out <- id
	}
}

func main() {
	out := make(chan int)
	for id := 0; id < 4; id++ {
		go sender(id, out)
	}
	seen := 0
	for i := 0; i < 12; i++ {
		seen += <-out
	}
	if seen != 18 {
		panic("lost a token")
	}
}
