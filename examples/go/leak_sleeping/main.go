// Command leak_sleeping leaves behind a goroutine asleep in time.Sleep: a
// reminder scheduled an hour ahead that main never waits for. It is blocked
// (reason "sleep"), not on a channel or a lock: still a leak.
package main

import (
	"fmt"
	"time"
)

func remind(after time.Duration, note string) {
	time.Sleep(after)
	fmt.Println(note)
}

func main() {
	go remind(time.Hour, "stand up")
	fmt.Println("scheduled")
}
