package main

import (
	"fmt"
	"syscall"
)

// peakRSS is the process's maximum resident set size.
func peakRSS() string {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.0f MiB", float64(ru.Maxrss)/1024) // Linux reports KiB
}
