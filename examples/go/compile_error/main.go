// Command compile_error does not compile (a type error), so the harness
// must report status build_error.
package main

func main() {
	var n int = "not a number"
	ch := make(chan int)
	go func() { ch <- n }()
	<-ch
}
