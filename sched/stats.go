package sched

// Moments accumulates count, sum and sum of squares of integers, so queue statistics are kept up to date
// in O(1) as requests come and go instead of rescanning the queue every pass. Integer sums stay exact.
type Moments struct {
	N          int
	Sum, SumSq int64
}

// Add counts x.
func (m *Moments) Add(x int) {
	m.N++
	m.Sum += int64(x)
	m.SumSq += int64(x) * int64(x)
}

// Remove uncounts x.
func (m *Moments) Remove(x int) {
	m.N--
	m.Sum -= int64(x)
	m.SumSq -= int64(x) * int64(x)
}

// Var is the population variance.
func (m Moments) Var() float64 {
	if m.N <= 1 {
		return 0 // one sample has none (most decode passes of a lightly loaded worker)
	}
	n := float64(m.N)
	mean := float64(m.Sum) / n
	return max(float64(m.SumSq)/n-mean*mean, 0)
}
