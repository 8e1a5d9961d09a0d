package clamp

import "testing"

func TestClamp(t *testing.T) {
	results := make(chan int, 2)
	go func() { results <- Clamp(-5, 0, 10) }()
	go func() { results <- Clamp(50, 0, 10) }()
	got := <-results + <-results
	if got != 10 {
		t.Errorf("Clamp sum = %d, want 10", got)
	}
}
