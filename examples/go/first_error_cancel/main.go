// Command first_error_cancel runs three tasks; the first one to fail cancels
// the others through a shared context, like an error group.
package main

import (
	"context"
	"errors"
	"sync"
)

func task(ctx context.Context, id int, fail bool) error {
	if fail {
		return errors.New("task failed")
	}
	<-ctx.Done()
	return ctx.Err()
}

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for id := 0; id < 3; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := task(ctx, id, id == 1); err != nil {
				once.Do(func() {
					first = err
					cancel()
				})
			}
		}()
	}
	wg.Wait()
	cancel()
	if first == nil {
		panic("no error recorded")
	}
}
