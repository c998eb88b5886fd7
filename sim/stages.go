package sim

import "github.com/mocker-sim/mocker/report"

// stages collects the pools' own latencies in disaggregated serving, in milliseconds: prefill (arrival
// to prompt computed, queueing included), transfer (room reserved to KV arrived), and decode wait (KV
// arrived to first token).
type stages struct {
	prefill, transfer, decodeWait *report.Samples
}

// newStages returns empty stages that go where col's samples go (a compact run's temporary file).
func newStages(col *report.Collector) stages {
	return stages{prefill: col.Samples(), transfer: col.Samples(), decodeWait: col.Samples()}
}

// fill adds the stage latencies to the pools' summaries.
func (s *stages) fill(sum *report.Summary, disaggregated bool) {
	if !disaggregated {
		return
	}
	for i := range sum.Pools {
		p := &sum.Pools[i]
		switch p.Name {
		case "prefill":
			p.Stages = append(p.Stages, report.Stage{Name: "prefill", Stats: s.prefill.Describe()},
				report.Stage{Name: "transfer", Stats: s.transfer.Describe()})
		case "decode":
			p.Stages = append(p.Stages, report.Stage{Name: "decode_wait", Stats: s.decodeWait.Describe()})
		}
	}
}
