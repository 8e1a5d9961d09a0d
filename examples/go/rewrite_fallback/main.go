// Command rewrite_fallback declares a function whose name the harness's
// object rewriting reserves (_tracegen*, go_harness/README.md): the
// rewritten program fails to build, so the harness builds the original
// source instead and marks its runs `fallback`.
package main

import "fmt"

func _tracegenSend(s string) { fmt.Println(s) }

func main() {
	done := make(chan bool)
	go func() {
		_tracegenSend("hello")
		done <- true
	}()
	<-done
}
