package engine

import (
	"testing"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokens"
)

// mmRun serves one request alone to its end and returns its admission's cached tokens and the prefill
// cost of its passes.
func mmRun(t *testing.T, e *Engine, r *sched.Request) (cached int, prefill time.Duration) {
	t.Helper()
	if err := e.Enqueue(r); err != nil {
		t.Fatal(err)
	}
	now := time.Duration(0)
	for !e.Idle() {
		p := e.Step(now)
		for _, rp := range p.Ranks {
			prefill += rp.Cost.Prefill
			for _, a := range rp.Admitted {
				cached = a.Cached
			}
		}
		if err := e.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		now = p.End
	}
	return cached, prefill
}

// TestImagesEncoderAndPrefixCache: identical text with a different image shares only the blocks before
// the image; a repeated image is encoded once, its encoder time charged once, exactly; an image whose
// tokens are all prefix-cached needs no encoding.
func TestImagesEncoderAndPrefixCache(t *testing.T) {
	const prefillMs, perToken = 10, 0.25 // 8 image tokens: 2 ms
	text := make([]uint32, 24)           // 6 blocks of 4
	other := make([]uint32, 24)
	for i := range text {
		text[i], other[i] = uint32(1000+i), uint32(5000+i)
	}
	x := tokens.Item{Key: 0xa, Start: 4, Len: 8} // blocks 1 and 2
	y := tokens.Item{Key: 0xb, Start: 4, Len: 8}
	for _, b := range []Backend{VLLM, SGLang} {
		t.Run(b.String(), func(t *testing.T) {
			e, err := New(Options{Backend: b, Timing: timing.Fixed{PrefillMs: prefillMs},
				VLLM:    vllm.Options{BlockSize: 4, NumBlocks: 64, MaxBatchedTokens: 64, PrefixCaching: true},
				SGLang:  sglang.Options{PageSize: 4, NumPages: 64, MaxPrefillTokens: 64, ClipMaxNewTokens: 8, Conservativeness: 1, PrefixCaching: true},
				Encoder: EncoderOptions{MsPerToken: perToken, CacheTokens: 16}})
			if err != nil {
				t.Fatal(err)
			}
			want := func(name string, cached int, prefill time.Duration, wantCached int, wantPrefill time.Duration) {
				t.Helper()
				if cached != wantCached || prefill != wantPrefill {
					t.Errorf("%s: cached %d, prefill %v; want %d, %v", name, cached, prefill, wantCached, wantPrefill)
				}
			}
			c, p := mmRun(t, e, &sched.Request{ID: 1, Prompt: text, MaxTokens: 1, Images: []tokens.Item{x}})
			want("text+x", c, p, 0, prefillMs*time.Millisecond+2*time.Millisecond)
			c, p = mmRun(t, e, &sched.Request{ID: 2, Prompt: text, MaxTokens: 1, Images: []tokens.Item{y}})
			want("same text+y", c, p, 4, prefillMs*time.Millisecond+2*time.Millisecond) // block 0 only
			c, p = mmRun(t, e, &sched.Request{ID: 3, Prompt: other, MaxTokens: 1, Images: []tokens.Item{x}})
			want("other text+x", c, p, 0, prefillMs*time.Millisecond) // x from the encoder cache
			if got, want := e.EncoderStats(), (EncoderStats{Images: 2, Tokens: 16, CacheHits: 1}); got != want {
				t.Errorf("after 3 requests: %+v, want %+v", got, want)
			}
			// Request 1 again: its image's blocks are prefix-cached, so nothing reads the encoder.
			c, _ = mmRun(t, e, &sched.Request{ID: 4, Prompt: text, MaxTokens: 1, Images: []tokens.Item{x}})
			if c < x.Start+x.Len {
				t.Errorf("text+x again: cached %d, want the image's blocks (>= %d)", c, x.Start+x.Len)
			}
			if got, want := e.EncoderStats(), (EncoderStats{Images: 2, Tokens: 16, CacheHits: 1}); got != want {
				t.Errorf("after the repeat: %+v, want %+v (no lookup)", got, want)
			}
		})
	}
}

// TestEncoderCacheLRU: the cache keeps the most recently used images that fit its tokens; an image larger
// than the cache is encoded every time.
func TestEncoderCacheLRU(t *testing.T) {
	enc := newEncoder(EncoderOptions{CacheTokens: 10})
	im := func(k uint64, n int) tokens.Item { return tokens.Item{Key: k, Len: n} }
	for i, step := range []struct {
		item tokens.Item
		hit  bool
	}{
		{im(1, 4), false}, {im(2, 4), false}, {im(1, 4), true}, // 1 is now the most recent
		{im(3, 4), false}, // 1, 3 and 2 do not fit: 2, the least recent, goes
		{im(2, 4), false}, // 1 goes
		{im(3, 4), true},
		{im(1, 4), false},
		{im(9, 11), false}, {im(9, 11), false}, // never fits
	} {
		if got := enc.lookup(step.item); got != step.hit {
			t.Errorf("step %d: lookup %d = %v, want %v", i, step.item.Key, got, step.hit)
		}
		if err := enc.check(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

// TestEncoderChargedToFirstChunk: an image split by chunked prefill is encoded in the pass whose chunk
// first reaches it, once.
func TestEncoderChargedToFirstChunk(t *testing.T) {
	e, err := New(Options{Timing: timing.Fixed{PrefillMs: 10},
		VLLM:    vllm.Options{BlockSize: 4, NumBlocks: 64, MaxBatchedTokens: 8, ChunkedPrefill: true, PrefixCaching: true},
		Encoder: EncoderOptions{MsPerToken: 0.5, CacheTokens: 100}})
	if err != nil {
		t.Fatal(err)
	}
	prompt := make([]uint32, 20)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
	}
	img := tokens.Item{Key: 1, Start: 6, Len: 8} // chunks [0,8) [8,16) [16,20): the first two hold it
	if err := e.Enqueue(&sched.Request{ID: 1, Prompt: prompt, MaxTokens: 1, Images: []tokens.Item{img}}); err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for now := time.Duration(0); !e.Idle(); {
		p := e.Step(now)
		got = append(got, p.Ranks[0].Cost.Prefill)
		now = p.End
	}
	want := []time.Duration{14 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("prefill costs %v, want %v (the image's 4 ms in the first chunk)", got, want)
	}
	if s := e.EncoderStats(); s != (EncoderStats{Images: 1, Tokens: 8}) {
		t.Errorf("stats %+v, want one image of 8 tokens, no hit", s)
	}
}
