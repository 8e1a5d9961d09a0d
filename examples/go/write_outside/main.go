// Command write_outside tries to write a file outside its scratch directory;
// in a sandbox (read-only root) this fails, the error is reported and the
// program still exits 0. It removes the file if the write did succeed.
package main

import (
	"fmt"
	"os"
)

const probe = "/etc/tracegen-probe"

func main() {
	if err := os.WriteFile(probe, []byte("probe\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "write refused as expected:", err)
		return
	}
	os.Remove(probe)
	fmt.Println("write unexpectedly succeeded")
}
