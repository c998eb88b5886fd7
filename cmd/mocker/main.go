// Command mocker simulates LLM inference engines without GPUs. See README.md.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "mocker:", err)
		os.Exit(1)
	}
}
