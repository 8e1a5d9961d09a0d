// Command sequential computes without starting any goroutine and writes its
// results straight to stdout: the only events are main's write syscalls, in
// the same order on every run. It allocates nothing in its loop and
// finishes in well under the scheduler's 10ms time slice, so neither GC
// assists nor preemption can interleave.
package main

import (
	"os"
	"strconv"
)

func collatzSteps(n int) int {
	steps := 0
	for n != 1 {
		if n%2 == 0 {
			n /= 2
		} else {
			n = 3*n + 1
		}
		steps++
	}
	return steps
}

func main() {
	buf := make([]byte, 0, 64)
	for _, limit := range []int{10, 100, 1000} {
		longest, at := 0, 0
		for i := 1; i <= limit; i++ {
			if s := collatzSteps(i); s > longest {
				longest, at = s, i
			}
		}
		buf = strconv.AppendInt(buf[:0], int64(at), 10)
		buf = append(buf, '\n')
		os.Stdout.Write(buf)
	}
}
