// Command waitgroup_go starts its workers with sync.WaitGroup.Go (Go 1.25+):
// the goroutines' start function is in package sync, but they are created
// by the program, so the harness keeps them.
package main

import "sync"

func main() {
	var wg sync.WaitGroup
	squares := make([]int, 4)
	for i := range squares {
		wg.Go(func() {
			squares[i] = i * i
		})
	}
	wg.Wait()
	if squares[3] != 9 {
		panic("bad square")
	}
}
