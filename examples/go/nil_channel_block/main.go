// Command nil_channel_block receives from a nil channel, which blocks
// forever (block reason "forever"): status deadlock.
package main

func main() {
	var ch chan int // never made
	go func() {
		ch <- 1 // also blocks forever
	}()
	<-ch
}
