package stuck

import "testing"

func TestAsk(t *testing.T) {
	if got := Ask("ping"); got == "" {
		t.Fatal("empty answer")
	}
}
