// Command dining_philosophers seats three philosophers at a table of three
// forks; each picks up the lower-numbered fork first, so they never
// deadlock.
package main

import (
	"runtime"
	"sync"
)

func dine(id int, left, right *sync.Mutex, meals int, wg *sync.WaitGroup) {
	defer wg.Done()
	first, second := left, right
	if id == 2 { // the last philosopher's left fork has the higher number
		first, second = right, left
	}
	for m := 0; m < meals; m++ {
		first.Lock()
		second.Lock()
		runtime.Gosched()
		second.Unlock()
		first.Unlock()
	}
}

func main() {
	forks := make([]sync.Mutex, 3)
	var wg sync.WaitGroup
	for id := 0; id < 3; id++ {
		wg.Add(1)
		go dine(id, &forks[id], &forks[(id+1)%3], 2, &wg)
	}
	wg.Wait()
}
