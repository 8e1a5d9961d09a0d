package bank

import (
	"sync"
	"testing"
)

func TestConcurrentTransfers(t *testing.T) {
	b := New(map[string]int{"a": 50, "b": 50})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				if i%2 == 0 {
					b.Transfer("a", "b", 3)
				} else {
					b.Transfer("b", "a", 2)
				}
			}
		}()
	}
	wg.Wait()
	if got := b.Total(); got != 100 {
		t.Fatalf("total = %d, want 100", got)
	}
}
