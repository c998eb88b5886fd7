package report

import "testing"

// TestLifetimes: every request that arrived is yielded once, in id order, with its times as recorded
// (a skipped id is not); a retry keeps the arrival and drops the rest; rejection keeps its reason.
func TestLifetimes(t *testing.T) {
	c := NewCollector()
	c.Arrived(0, 1, 100, 4)
	c.Routed(0, 3)
	c.Admitted(0, 2, 16)
	c.Tokens(0, 5, 1)
	c.Tokens(0, 6, 2)
	c.Finished(0, 6)
	c.Arrived(2, 3, 50, 2)
	c.Rejected(2, 4, "too long")
	c.Arrived(3, 4, 10, 1)
	c.Routed(3, 1)
	c.Admitted(3, 5, 0)
	c.Retried(3, 7)
	c.Admitted(3, 9, 8)
	want := map[int]Lifetime{
		0: {Arrival: 1, Admission: 2, FirstToken: 5, End: 6, Worker: 3, Admitted: true, Completed: true, InputTokens: 100, CachedTokens: 16, Tokens: 3, Shown: 3},
		2: {Arrival: 3, End: 4, Worker: -1, Rejected: true, InputTokens: 50, Reason: "too long"},
		3: {Arrival: 4, Admission: 9, Worker: -1, Admitted: true, InputTokens: 10, CachedTokens: 8, Retries: 1},
	}
	var ids []int
	for id, l := range c.Lifetimes() {
		ids = append(ids, id)
		if l != want[id] {
			t.Errorf("request %d: %+v, want %+v", id, l, want[id])
		}
	}
	if len(ids) != 3 || ids[0] != 0 || ids[1] != 2 || ids[2] != 3 {
		t.Errorf("ids %v, want [0 2 3]", ids)
	}
}
