// Command cond_queue implements a bounded queue with sync.Cond: producers
// wait while it is full, consumers wait while it is empty.
package main

import "sync"

type queue struct {
	mu       sync.Mutex
	notEmpty *sync.Cond
	notFull  *sync.Cond
	items    []int
	capacity int
}

func newQueue(capacity int) *queue {
	q := &queue{capacity: capacity}
	q.notEmpty = sync.NewCond(&q.mu)
	q.notFull = sync.NewCond(&q.mu)
	return q
}

func (q *queue) put(v int) {
	q.mu.Lock()
	for len(q.items) == q.capacity {
		q.notFull.Wait()
	}
	q.items = append(q.items, v)
	q.notEmpty.Signal()
	q.mu.Unlock()
}

func (q *queue) take() int {
	q.mu.Lock()
	for len(q.items) == 0 {
		q.notEmpty.Wait()
	}
	v := q.items[0]
	q.items = q.items[1:]
	q.notFull.Signal()
	q.mu.Unlock()
	return v
}

func main() {
	q := newQueue(1)
	done := make(chan int)
	go func() {
		sum := 0
		for i := 0; i < 6; i++ {
			sum += q.take()
		}
		done <- sum
	}()
	for i := 1; i <= 6; i++ {
		q.put(i)
	}
	if <-done != 21 {
		panic("bad sum")
	}
}
