// Command leaked_select leaks a goroutine blocked on a select that no one
// will ever satisfy; main returns normally once the goroutine has blocked.
package main

import "runtime"

func waitForever(never chan int, alsoNever chan string, started chan<- struct{}) {
	started <- struct{}{}
	select {
	case <-never:
	case <-alsoNever:
	}
	println("unreachable")
}

func main() {
	never := make(chan int)
	alsoNever := make(chan string)
	started := make(chan struct{})
	go waitForever(never, alsoNever, started)
	<-started
	// Give the leaked goroutine the processor so it reaches its select.
	for i := 0; i < 10; i++ {
		runtime.Gosched()
	}
}
