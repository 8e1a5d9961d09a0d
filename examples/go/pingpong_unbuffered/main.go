// Command pingpong_unbuffered bounces a ball between two goroutines over
// unbuffered channels; every hand-off is a rendezvous, so the order of
// events is fixed.
package main

func player(in <-chan int, out chan<- int, done chan<- struct{}) {
	for {
		ball, ok := <-in
		if !ok {
			done <- struct{}{}
			return
		}
		if ball == 6 {
			close(out)
			done <- struct{}{}
			return
		}
		out <- ball + 1
	}
}

func main() {
	ping, pong := make(chan int), make(chan int)
	done := make(chan struct{})
	go player(ping, pong, done)
	go player(pong, ping, done)
	ping <- 0
	<-done
	<-done
}
