// Command net_dial tries to connect to the discard port on localhost, which
// a sandbox (or a host without that service) refuses; it reports the error
// and still exits 0.
package main

import (
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:9", 500*time.Millisecond)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial failed as expected:", err)
		return
	}
	conn.Close()
	fmt.Println("dial unexpectedly succeeded")
}
