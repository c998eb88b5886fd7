//go:build race

package live

// The race detector's instrumentation allocates: allocation counts are not checked under it.
func init() { raceDetector = true }
