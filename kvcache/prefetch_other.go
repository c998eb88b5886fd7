//go:build !((amd64 || arm64) && gc && !purego)

package kvcache

import "unsafe"

// prefetchLine does nothing where the package has no prefetch instruction to give: the loads come when
// they are made.
func prefetchLine(addr unsafe.Pointer) {}
