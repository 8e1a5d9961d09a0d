// Command os_exit_nonzero finishes its goroutine's work and exits with code
// 3 (status exit_error). os.Exit skips the harness's trace flush, so only
// complete trace generations survive (usually none for a run this short).
package main

import "os"

func main() {
	done := make(chan bool)
	go func() { done <- true }()
	<-done
	os.Exit(3)
}
