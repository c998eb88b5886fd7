//go:build !linux

package main

func hugeHeap(int) {}
