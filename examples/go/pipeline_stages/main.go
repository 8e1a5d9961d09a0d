// Command pipeline_stages chains generate -> square -> filter stages, each
// its own goroutine connected by unbuffered channels.
package main

func generate(n int) <-chan int {
	out := make(chan int)
	go func() {
		defer close(out)
		for i := 1; i <= n; i++ {
			out <- i
		}
	}()
	return out
}

func square(in <-chan int) <-chan int {
	out := make(chan int)
	go func() {
		defer close(out)
		for v := range in {
			out <- v * v
		}
	}()
	return out
}

func odd(in <-chan int) <-chan int {
	out := make(chan int)
	go func() {
		defer close(out)
		for v := range in {
			if v%2 == 1 {
				out <- v
			}
		}
	}()
	return out
}

func main() {
	total := 0
	for v := range odd(square(generate(6))) {
		total += v
	}
	if total != 35 {
		panic("bad total")
	}
}
