// Command once_init has three goroutines race to initialise a table through
// sync.Once; all of them must see the same table.
package main

import "sync"

var (
	once  sync.Once
	table []int
)

func load() {
	for i := 0; i < 5; i++ {
		table = append(table, i*i)
	}
}

func lookup(i int, out chan<- int) {
	once.Do(load)
	out <- table[i]
}

func main() {
	out := make(chan int)
	for i := 1; i <= 3; i++ {
		go lookup(i, out)
	}
	sum := 0
	for i := 0; i < 3; i++ {
		sum += <-out
	}
	if sum != 14 {
		panic("bad sum")
	}
}
