// Command select_default polls channels with select/default: a non-blocking
// send into a full buffer and non-blocking receives that yield until a
// worker has produced.
package main

import "runtime"

func main() {
	buf := make(chan int, 1)
	buf <- 1
	dropped := 0
	select {
	case buf <- 2:
	default:
		dropped++
	}
	<-buf

	ready := make(chan int)
	go func() { ready <- 42 }()
	polls := 0
	for {
		select {
		case v := <-ready:
			if v != 42 || dropped != 1 {
				panic("bad values")
			}
			return
		default:
			polls++
			runtime.Gosched()
		}
	}
}
