package perfetto

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// event is one trace event as a reader of the trace-event format sees it, times in nanoseconds.
type event struct {
	Ph, Name, Cat, S string
	Pid, Tid         *int
	ID               *int
	TS, Dur          int64
	HasTS, HasDur    bool
	Args             map[string]any
}

// parse reads a trace with encoding/json, keeping numbers exact.
func parse(data []byte) ([]event, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var f struct {
		TraceEvents     []map[string]any `json:"traceEvents"`
		DisplayTimeUnit string           `json:"displayTimeUnit"`
	}
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the trace object")
	}
	if f.DisplayTimeUnit != "ms" || f.TraceEvents == nil {
		return nil, fmt.Errorf("displayTimeUnit %q, traceEvents %v", f.DisplayTimeUnit, f.TraceEvents != nil)
	}
	evs := make([]event, len(f.TraceEvents))
	for i, m := range f.TraceEvents {
		e := &evs[i]
		for k, v := range m {
			var err error
			switch k {
			case "ph", "name", "cat", "s":
				s, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("event %d: %s %v is not a string", i, k, v)
				}
				*map[string]*string{"ph": &e.Ph, "name": &e.Name, "cat": &e.Cat, "s": &e.S}[k] = s
			case "pid", "tid", "id":
				n, err := intOf(v)
				if err != nil {
					return nil, fmt.Errorf("event %d: %s: %w", i, k, err)
				}
				*map[string]**int{"pid": &e.Pid, "tid": &e.Tid, "id": &e.ID}[k] = &n
			case "ts":
				e.TS, err = micros(v)
				e.HasTS = true
			case "dur":
				e.Dur, err = micros(v)
				e.HasDur = true
			case "args":
				var ok bool
				if e.Args, ok = v.(map[string]any); !ok {
					return nil, fmt.Errorf("event %d: args %v is not an object", i, v)
				}
			default:
				return nil, fmt.Errorf("event %d: unknown key %q", i, k)
			}
			if err != nil {
				return nil, fmt.Errorf("event %d: %s: %w", i, k, err)
			}
		}
	}
	return evs, nil
}

func intOf(v any) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", v)
	}
	i, err := strconv.Atoi(string(n))
	return i, err
}

// micros converts a timestamp in microseconds to nanoseconds exactly; it must have at most three
// decimals (the trace is written from nanoseconds) and not be negative.
func micros(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", v)
	}
	whole, frac, _ := strings.Cut(string(n), ".")
	if len(frac) > 3 || strings.ContainsAny(string(n), "eE-") {
		return 0, fmt.Errorf("%s µs is not a whole number of nanoseconds >= 0", n)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseInt((frac + "000")[:3], 10, 64)
	return w*1000 + f, err
}

type threadKey struct{ pid, tid int }

type asyncKey struct {
	pid int
	cat string
	id  int
}

// validate checks a trace against the trace-event format as Perfetto and chrome://tracing read it:
// every event has the fields its phase type needs; process and thread metadata name every process and
// thread used; B/E events balance and nest per thread; X slices on a thread nest (a slice inside
// another is wholly inside it) and slices named "pass" never overlap; async b/e events pair by cat and
// id, nest, and end in time order; counters have numeric args; instant events have a scope.
func validate(evs []event) error {
	procs, threads := map[int]bool{}, map[threadKey]bool{}
	used := map[threadKey]bool{}
	stacks := map[threadKey][]event{}
	xs := map[threadKey][]event{}
	async := map[asyncKey][]event{}
	lastAsync := map[asyncKey]int64{}
	for i, e := range evs {
		bad := func(why string, args ...any) error {
			return fmt.Errorf("event %d %+v: %s", i, e, fmt.Sprintf(why, args...))
		}
		if e.Name == "" || e.Pid == nil || !e.HasTS {
			return bad("needs name, pid and ts")
		}
		needTid := e.Ph != "b" && e.Ph != "e" && !(e.Ph == "M" && e.Name == "process_name" || e.Ph == "M" && e.Name == "process_sort_index")
		if needTid && e.Tid == nil {
			return bad("needs tid")
		}
		var k threadKey
		if e.Tid != nil {
			k = threadKey{*e.Pid, *e.Tid}
		}
		if e.HasDur != (e.Ph == "X") {
			return bad("dur goes with ph X, and only X")
		}
		if (e.ID != nil || e.Cat != "") != (e.Ph == "b" || e.Ph == "e") {
			return bad("id and cat go with async events, and only them")
		}
		switch e.Ph {
		case "M":
			switch e.Name {
			case "process_name", "thread_name":
				if s, ok := e.Args["name"].(string); !ok || s == "" || len(e.Args) != 1 {
					return bad("metadata without a name")
				}
				if e.Name == "process_name" {
					procs[*e.Pid] = true
				} else {
					threads[k] = true
				}
			case "process_sort_index", "thread_sort_index":
				if _, err := intOf(e.Args["sort_index"]); err != nil || len(e.Args) != 1 {
					return bad("sort index: %v", err)
				}
			default:
				return bad("unknown metadata")
			}
		case "X":
			xs[k] = append(xs[k], e)
			used[k] = true
		case "B":
			stacks[k] = append(stacks[k], e)
			used[k] = true
		case "E":
			s := stacks[k]
			if len(s) == 0 || s[len(s)-1].Name != e.Name || e.TS < s[len(s)-1].TS {
				return bad("E without its B")
			}
			stacks[k] = s[:len(s)-1]
		case "b", "e":
			if e.ID == nil || e.Cat == "" {
				return bad("async event without cat and id")
			}
			ak := asyncKey{*e.Pid, e.Cat, *e.ID}
			if e.TS < lastAsync[ak] {
				return bad("async event before the previous one of its id")
			}
			lastAsync[ak] = e.TS
			if e.Ph == "b" {
				async[ak] = append(async[ak], e)
				used[threadKey{*e.Pid, -1}] = true // a process's async track: no thread
				break
			}
			s := async[ak]
			if len(s) == 0 || s[len(s)-1].Name != e.Name {
				return bad("e without its b")
			}
			async[ak] = s[:len(s)-1]
		case "i":
			if e.S != "t" && e.S != "p" && e.S != "g" {
				return bad("instant scope %q", e.S)
			}
			used[k] = true
		case "C":
			if len(e.Args) == 0 {
				return bad("counter without values")
			}
			for name, v := range e.Args {
				if n, ok := v.(json.Number); !ok {
					return bad("counter %s = %v is not a number", name, v)
				} else if _, err := n.Float64(); err != nil {
					return bad("counter %s: %v", name, err)
				}
			}
			used[k] = true
		default:
			return bad("unknown phase type")
		}
	}
	for k, s := range stacks {
		if len(s) > 0 {
			return fmt.Errorf("thread %v: %d B events never end", k, len(s))
		}
	}
	for k, s := range async {
		if len(s) > 0 {
			return fmt.Errorf("async %v: %d b events never end", k, len(s))
		}
	}
	for k := range used {
		if !procs[k.pid] || k.tid >= 0 && !threads[k] {
			return fmt.Errorf("thread %v is not named", k)
		}
	}
	for k, s := range xs {
		if err := nested(s); err != nil {
			return fmt.Errorf("thread %v: %w", k, err)
		}
	}
	return nil
}

// nested checks that slices nest, outer before inner at equal starts, and that "pass" slices do not
// overlap.
func nested(s []event) error {
	s = slices.Clone(s)
	slices.SortStableFunc(s, func(a, b event) int { return cmp.Or(cmp.Compare(a.TS, b.TS), cmp.Compare(b.Dur, a.Dur)) })
	var open []event
	var lastPassEnd int64 = -1
	for _, e := range s {
		for len(open) > 0 && open[len(open)-1].TS+open[len(open)-1].Dur <= e.TS {
			open = open[:len(open)-1]
		}
		if n := len(open); n > 0 && e.TS+e.Dur > open[n-1].TS+open[n-1].Dur {
			return fmt.Errorf("%s [%d, +%d] overlaps %s [%d, +%d] without nesting", e.Name, e.TS, e.Dur, open[n-1].Name, open[n-1].TS, open[n-1].Dur)
		}
		if e.Name == "pass" {
			if e.TS < lastPassEnd {
				return fmt.Errorf("pass at %d starts before the previous one ends at %d", e.TS, lastPassEnd)
			}
			lastPassEnd = e.TS + e.Dur
		}
		open = append(open, e)
	}
	return nil
}
