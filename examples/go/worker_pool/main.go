// Command worker_pool feeds jobs to three workers over a jobs channel and
// collects their results over a results channel.
package main

import "sync"

type result struct{ job, square int }

func worker(jobs <-chan int, results chan<- result, wg *sync.WaitGroup) {
	defer wg.Done()
	for j := range jobs {
		results <- result{j, j * j}
	}
}

func main() {
	jobs := make(chan int)
	results := make(chan result, 4)
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go worker(jobs, results, &wg)
	}
	go func() {
		for j := 1; j <= 9; j++ {
			jobs <- j
		}
		close(jobs)
	}()
	go func() {
		wg.Wait()
		close(results)
	}()
	total := 0
	for r := range results {
		total += r.square
	}
	if total != 285 {
		panic("bad total")
	}
}
