// Command select_schedule_dependent has a goroutine whose select is
// satisfied or leaked depending on the runtime's choice. The picker and main
// each wait in a select over their own quick channel and a shared slow one.
// A dealer, once both have parked, offers one quick value to both at once:
// with both sends ready, the runtime picks one uniformly at random, so the
// outcome does not lean on machine load. If the picker got it, main waits for
// the slow value and every goroutine ends (status ok). If main got it, main
// returns while the slow sender still sleeps, and the picker is left blocked
// in its select (status leak: the picker listed in "leaked", blocked(select),
// beside the sleeping sender, blocked(sleep)).
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

func main() {
	toPicker := make(chan int)
	toMain := make(chan int)
	slow := make(chan int)
	go take(toPicker, slow) // the picker
	go func() {
		time.Sleep(5 * time.Millisecond) // both have parked by then
		select {
		case toPicker <- 1:
		case toMain <- 1:
		}
	}()
	go func() {
		time.Sleep(300 * time.Millisecond) // far past the harness's 100 ms grace after main returns
		slow <- 2
	}()
	take(toMain, slow)
}
