package main

import (
	"os"
	"runtime"
	"strings"
	"syscall"
	"unsafe"
)

// hugeHeap asks Linux to back the Go heap with transparent huge pages where it gives them only when asked
// (THP "madvise", a common default). An offline run touches a few hundred MB of heap, and each first
// touch of a 4 KiB page is a page fault: on a virtual machine they cost ~20 µs each, a sixth of the
// conversation replay's CPU time, where a 2 MiB page takes one fault. The runtime maps heap arenas as the
// heap grows and never asks for huge pages itself, so this maps size bytes of arenas at once (an
// allocation freed again untouched: address space, not memory) and advises everything from the first
// arena to their end; a 2 MiB range that nothing has touched yet then faults in whole. Best effort: an
// error (no THP, a hole in the range) leaves the pages as they were, and no result depends on it.
// GODEBUG=disablethp=1, the runtime's switch for small pages, turns it off.
func hugeHeap(size int) {
	if strings.Contains(","+os.Getenv("GODEBUG")+",", ",disablethp=1,") {
		return
	}
	const arena = 64 << 20 // the runtime's heap arena on 64-bit Linux
	first := new(uint64)
	b := make([]byte, size)
	lo := uintptr(unsafe.Pointer(first)) &^ (arena - 1)
	hi := uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(size)
	if hi > lo {
		const madvHugepage = 14 // MADV_HUGEPAGE on every Linux architecture
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, madvHugepage)
	}
	runtime.KeepAlive(first)
	runtime.KeepAlive(b)
	runtime.GC() // frees b now, so that what comes next is allocated there rather than past it
}
