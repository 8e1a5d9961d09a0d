// Command double_lock locks a non-reentrant sync.Mutex twice from the same
// call chain: main blocks forever (status deadlock).
package main

import "sync"

type account struct {
	mu      sync.Mutex
	balance int
}

func (a *account) deposit(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.balance += n
}

func (a *account) depositTwice(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deposit(n) // locks a.mu again
	a.deposit(n)
}

func main() {
	a := &account{}
	a.deposit(1)
	a.depositTwice(2)
}
