// Package leak starts a background watcher that nobody ever stops.
package leak

// Watch starts a goroutine that reports it started, then waits for a stop
// signal nobody sends; it returns the channel the goroutine reports on.
func Watch() <-chan string {
	stop := make(chan struct{})
	events := make(chan string)
	go func() {
		events <- "started"
		<-stop // blocks forever: no one closes stop
		events <- "stopped"
	}()
	return events
}
