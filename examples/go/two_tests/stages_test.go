package stages

import "testing"

func TestDoubler(t *testing.T) {
	in := make(chan int)
	out := Doubler(in)
	go func() {
		for i := 1; i <= 3; i++ {
			in <- i
		}
		close(in)
	}()
	sum := 0
	for v := range out {
		sum += v
	}
	if sum != 12 {
		t.Fatalf("sum = %d, want 12", sum)
	}
}

func TestRace(t *testing.T) {
	v := Race(func() int { return 1 }, func() int { return 1 })
	if v != 1 {
		t.Fatalf("Race = %d", v)
	}
}
