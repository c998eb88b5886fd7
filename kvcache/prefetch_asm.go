//go:build (amd64 || arm64) && gc && !purego

package kvcache

import "unsafe"

// prefetchLine asks the CPU to bring addr's cache line in, without waiting for it (an x86 PREFETCHT0, an
// arm64 PRFM): the instruction retires at once, so a loop of them puts as many misses in flight as the
// memory system takes, where a plain load would hold up the loop behind each miss.
//
//go:noescape
func prefetchLine(addr unsafe.Pointer)
