// Command select_schedule_dependent has a goroutine whose select is
// satisfied or leaked depending on the schedule. The picker and main both
// wake at the same instant and then select over two channels: a quick one,
// sent on soon after, and a slow one, sent on much later. The quick value
// goes to whichever of the two parked first. If the picker got it, main waits
// for the slow value and every goroutine ends (status ok). If main got it,
// main returns while the slow sender still sleeps, and the picker is left
// blocked in its select (status leak, the picker listed in "leaked").
package main

import "time"

// take receives one value from either channel.
func take(quick, slow <-chan int) int {
	select {
	case v := <-quick:
		return v
	case v := <-slow:
		return v
	}
}

func picker(start time.Time, quick, slow <-chan int) {
	time.Sleep(time.Until(start))
	take(quick, slow)
}

func main() {
	quick := make(chan int)
	slow := make(chan int)
	start := time.Now().Add(2 * time.Millisecond)
	go picker(start, quick, slow)
	go func() {
		time.Sleep(time.Until(start.Add(time.Millisecond))) // both have parked by then
		quick <- 1
	}()
	go func() {
		time.Sleep(30 * time.Millisecond) // far longer than stopping the trace
		slow <- 2
	}()
	time.Sleep(time.Until(start)) // wake together with the picker
	take(quick, slow)
}
