package aic

import (
	"sync"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

// TestNewShared checks that New builds a deployment once however many goroutines ask for it, that the
// shared Model prices as a fresh build does, and that whatever differs in the Options (the model by
// value, not by name; the TP) gets a Model of its own.
func TestNewShared(t *testing.T) {
	needData(t)
	mdl, err := model.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Model: mdl, System: h200(t), Root: aicRoot, Backend: "vllm", GEMMQuant: "fp8", TP: 2}
	got := make([]*Model, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			m, err := New(o)
			if err != nil {
				t.Error(err)
			}
			got[i] = m
		})
	}
	wg.Wait()
	for i, m := range got {
		if m != got[0] {
			t.Fatalf("goroutine %d got model %p, goroutine 0 %p: built twice", i, m, got[0])
		}
	}
	shared := got[0]
	fresh, err := newModel(o)
	if err != nil {
		t.Fatal(err)
	}
	b := realisticBatch()
	if s, f := shared.Cost(b), fresh.Cost(b); s != f {
		t.Errorf("shared model's cost %+v, a fresh build's %+v", s, f)
	}
	if s, f := shared.Version(), fresh.Version(); s != f {
		t.Errorf("shared model's version %q, a fresh build's %q", s, f)
	}

	tp1 := o
	tp1.TP = 1
	if m, err := New(tp1); err != nil || m == shared {
		t.Errorf("TP 1: model %p (err %v), TP 2's is %p: want a model of its own", m, err, shared)
	}
	deeper := *o.Model
	deeper.Layers++
	more := o
	more.Model = &deeper
	m, err := New(more)
	if err != nil {
		t.Fatal(err)
	}
	if m == shared || m.Cost(b) == shared.Cost(b) {
		t.Errorf("%d layers priced as %d (%v): the cache keys on the model's name", deeper.Layers, o.Model.Layers, m.Cost(b))
	}
}

// TestCacheKeyRoot checks that a relative root is keyed with the working directory it is relative to,
// and only a relative one.
func TestCacheKeyRoot(t *testing.T) {
	key := func(root string) string {
		k, ok := cacheKey(Options{Root: root, Backend: "vllm"})
		if !ok {
			t.Fatalf("root %q: no key", root)
		}
		return k
	}
	roots := []string{"db", "/abs/db", EmbeddedRoot, ""}
	before := map[string]string{}
	for _, r := range roots {
		before[r] = key(r)
	}
	t.Chdir(t.TempDir())
	for _, r := range roots {
		if changed := key(r) != before[r]; changed != (r == "db") {
			t.Errorf("root %q: key changed with the working directory: %v, want %v", r, changed, r == "db")
		}
	}
	if key("db") == key("/abs/db") || key("") == key(".") {
		t.Error("distinct roots share a key")
	}
}

// BenchmarkNew is a deployment priced again (a config's checks, its lifetime replay, its run).
func BenchmarkNew(b *testing.B) {
	needData(b)
	mdl, err := model.Lookup("llama-3.1-8b")
	if err != nil {
		b.Fatal(err)
	}
	o := Options{Model: mdl, System: h200(b), Root: aicRoot, Backend: "vllm", GEMMQuant: "fp8"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(o); err != nil {
			b.Fatal(err)
		}
	}
}
