// Package bank moves money between accounts under one mutex.
package bank

import "sync"

// Bank holds balances guarded by a mutex.
type Bank struct {
	mu       sync.Mutex
	balances map[string]int
}

// New returns a bank with the given opening balances.
func New(balances map[string]int) *Bank { return &Bank{balances: balances} }

// Transfer moves amount from one account to another if funds allow.
func (b *Bank) Transfer(from, to string, amount int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.balances[from] < amount {
		return false
	}
	b.balances[from] -= amount
	b.balances[to] += amount
	return true
}

// Total is the sum of all balances.
func (b *Bank) Total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	total := 0
	for _, v := range b.balances {
		total += v
	}
	return total
}
