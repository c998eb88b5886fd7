package timing

import "time"

// Part is one operation's share of a pass, in milliseconds. A part may be negative where overlapping
// work is credited back (the DeepSeek family's shared expert running beside the routed experts).
type Part struct {
	Op string  `json:"op"`
	Ms float64 `json:"ms"`
}

// Itemizer is a Model that can say what a pass's time is made of: its parts sum to Cost's total.
type Itemizer interface {
	Model
	Parts(b *Batch) []Part
}

// Parts itemizes b's pass with m's own Parts where m has them (wrappers pass the question on), and
// otherwise returns one part, "pass", of the whole cost.
func Parts(m Model, b *Batch) []Part {
	if it, ok := m.(Itemizer); ok {
		return it.Parts(b)
	}
	return []Part{{Op: "pass", Ms: msOf(m.Cost(b).Total())}}
}

// Parts implements Itemizer: the wrapped model's parts and the host's.
func (h HostOverhead) Parts(b *Batch) []Part {
	parts := Parts(h.Model, b)
	if host := h.PerRequest * time.Duration(len(b.Seqs)); host > 0 {
		parts = append(parts, Part{Op: "host", Ms: msOf(host)})
	}
	return parts
}

// Parts implements Itemizer: the wrapped model's parts, each scaled as the pass's total is (with a
// decode speed-up the prefill and decode halves scale differently, and parts are not split by half).
func (s Scaled) Parts(b *Batch) []Part {
	parts := Parts(s.Model, b)
	raw, scaled := s.Model.Cost(b).Total(), s.Cost(b).Total()
	if raw == scaled {
		return parts
	}
	f := 0.0
	if raw > 0 {
		f = float64(scaled) / float64(raw)
	}
	for i := range parts {
		parts[i].Ms *= f
	}
	return parts
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
