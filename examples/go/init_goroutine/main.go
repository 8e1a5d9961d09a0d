// Command init_goroutine starts a background goroutine from an init function;
// main talks to it over a request channel. Tracing starts before the user's
// init functions run, so the goroutine's creation is traced.
package main

var requests = make(chan chan int)

func init() {
	go serve()
}

func serve() {
	n := 0
	for reply := range requests {
		n++
		reply <- n
	}
}

func main() {
	reply := make(chan int)
	for i := 0; i < 3; i++ {
		requests <- reply
		<-reply
	}
	close(requests)
}
