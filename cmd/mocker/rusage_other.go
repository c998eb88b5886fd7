//go:build !linux

package main

func peakRSS() string { return "unknown" }
