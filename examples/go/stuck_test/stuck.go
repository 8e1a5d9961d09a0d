// Package stuck has a request/response helper whose responder never answers.
package stuck

// Ask sends q to a responder goroutine and waits for an answer that the
// responder forgets to send: the caller blocks forever.
func Ask(q string) string {
	req := make(chan string)
	resp := make(chan string)
	go func() {
		<-req
		// forgot: resp <- "answer"
	}()
	req <- q
	return <-resp
}
