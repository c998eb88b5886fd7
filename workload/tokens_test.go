package workload

import (
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/mocker-sim/mocker/tokens"
)

// The reference's loadgen rule (dynamo-mocker.md §9, §13): each hash id is
// TraceBlockSize copies of its low 32 bits, truncated at input_length.
func TestAppendTokensFromHashIDs(t *testing.T) {
	const u = 0 // placeholder for a request-unique token
	tests := []struct {
		line  string
		block int
		want  []uint32
	}{
		{`{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": [1, 2]}`, 4, []uint32{1, 1, 1, 1, 2, 2}},
		{`{"timestamp": 0, "output_length": 1, "hash_ids": [1, 2]}`, 4, []uint32{1, 1, 1, 1, 2, 2, 2, 2}},
		{`{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": [7, 8]}`, 2, []uint32{7, 7, 8}},
		{`{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [5, 6]}`, 2, []uint32{5, 5, 6, 6, u}},
		{`{"timestamp": 0, "input_length": 3, "output_length": 1}`, 2, []uint32{u, u, u}},
		{`{"timestamp": 0, "input_length": 2, "output_length": 1, "hash_ids": [4294967303]}`, 2, []uint32{7, 7}}, // 2^32 + 7
		{`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [18446744073709551615]}`, 2, []uint32{0xffffffff}},
	}
	for _, tt := range tests {
		sessions := readMooncakeString(t, tt.line, TraceOptions{TraceBlockSize: tt.block})
		r := sessions[0].Turns[0]
		got := r.AppendTokens(nil)
		if len(got) != len(tt.want) {
			t.Errorf("%s (block %d): tokens %v, want %v", tt.line, tt.block, got, tt.want)
			continue
		}
		for i, w := range tt.want {
			if w == u {
				if got[i]&uniqueBit == 0 {
					t.Errorf("%s: token %d = %#x, want a request-unique token (top bit set)", tt.line, i, got[i])
				}
				continue
			}
			if got[i] != w {
				t.Errorf("%s (block %d): tokens %v, want %v", tt.line, tt.block, got, tt.want)
				break
			}
		}
	}
}

func TestAppendTokensAppendsAndRepeats(t *testing.T) {
	r := Request{Key: 3, InputLen: 10, hashes: []uint32{9}, blockSize: 4}
	dst := []uint32{100, 200}
	got := r.AppendTokens(dst)
	if len(got) != 12 || got[0] != 100 || got[1] != 200 || got[2] != 9 || got[5] != 9 || got[6]&uniqueBit == 0 {
		t.Fatalf("AppendTokens = %v", got)
	}
	if again := r.AppendTokens(nil); !slices.Equal(again, got[2:]) {
		t.Errorf("second call %v, want %v", again, got[2:])
	}
	if zero := (&Request{}).AppendTokens(nil); len(zero) != 0 {
		t.Errorf("zero Request made %v", zero)
	}
}

func TestAppendTokensAllocationFree(t *testing.T) {
	r := Request{Key: 1, InputLen: 5000, hashes: []uint32{1, 2, 3}, blockSize: 512}
	dst := make([]uint32, 0, r.InputLen)
	if n := testing.AllocsPerRun(100, func() { dst = r.AppendTokens(dst[:0]) }); n != 0 {
		t.Errorf("AppendTokens allocates %v times with capacity", n)
	}
}

// Request-unique tokens differ between requests (by Key and by salt) and
// are the same for the same request.
func TestUniqueTokens(t *testing.T) {
	a := Request{Key: 1, InputLen: 64}
	b := Request{Key: 2, InputLen: 64}
	c := Request{Key: 1, InputLen: 64, salt: 99}
	ta, tb, tc := a.AppendTokens(nil), b.AppendTokens(nil), c.AppendTokens(nil)
	if slices.Equal(ta, tb) || slices.Equal(ta, tc) {
		t.Errorf("unique tokens repeat across requests: %v / %v / %v", ta[:4], tb[:4], tc[:4])
	}
	seen := map[uint32]bool{}
	for _, tok := range slices.Concat(ta, tb, tc) {
		if tok&uniqueBit == 0 {
			t.Fatalf("unique token %#x without the top bit", tok)
		}
		seen[tok] = true
	}
	if len(seen) != 3*64 {
		t.Errorf("%d distinct tokens among 192 unique ones", len(seen))
	}
}

func BenchmarkAppendTokens(b *testing.B) {
	// Shaped like the conversation trace's mean request: 12,035 tokens, 24
	// hash ids of 512 tokens (the last partial); plus a tail of unique
	// tokens and an all-unique request.
	hashes := make([]uint32, 24)
	for i := range hashes {
		hashes[i] = uint32(i)
	}
	cases := []struct {
		name string
		r    Request
	}{
		{"hashes", Request{Key: 1, InputLen: 12035, hashes: hashes, blockSize: 512}},
		{"hashes+unique", Request{Key: 1, InputLen: 12035, hashes: hashes[:12], blockSize: 512}},
		{"unique", Request{Key: 1, InputLen: 12035}},
		{"prefix+unique", Request{Key: 1, InputLen: 12035, prefixLen: 6000, prefix: 42}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dst := make([]uint32, 0, c.r.InputLen)
			b.SetBytes(int64(4 * c.r.InputLen))
			b.ReportAllocs()
			for b.Loop() {
				dst = c.r.AppendTokens(dst[:0])
			}
		})
	}
}

// TestAppendSequenceMatchesTokens: feeding a request's prompt as runs gives the same block identities as
// hashing its tokens, for trace rows (with and without tokens beyond their hash ids) and synthetic ones.
func TestAppendSequenceMatchesTokens(t *testing.T) {
	src, err := ReadTrace(strings.NewReader(`{"timestamp": 0, "input_length": 700, "output_length": 1, "hash_ids": [5, 6]}
{"timestamp": 0, "input_length": 300, "output_length": 1, "hash_ids": [5]}
{"timestamp": 0, "input_length": 77, "output_length": 1}
`), "t.jsonl", TraceOptions{TraceBlockSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	syn, err := NewSynthetic(SyntheticOptions{NumRequests: 3, Input: Length{Mean: 700}, Output: Length{Mean: 1}, RequestRate: 1,
		SharedPrefixRatio: 0.5, NumPrefixGroups: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Source{src, syn} {
		for {
			sess, err := s.Next()
			if err != nil {
				break
			}
			r := &sess.Turns[0]
			for _, bs := range []int{1, 16, 64} {
				a, b := tokens.NewSequence(bs), tokens.NewSequence(bs)
				a.Append(r.AppendTokens(nil)...)
				r.AppendSequence(b)
				if !slices.Equal(a.Blocks(), b.Blocks()) || !slices.Equal(a.Tail(), b.Tail()) || a.Len() != b.Len() {
					t.Fatalf("line %d key %d, block size %d: AppendSequence differs from AppendTokens", r.Line, r.Key, bs)
				}
			}
		}
	}
}

// TestRequestSize: a Request is 256 bytes (an overloaded conversation replay holds every waiting
// session's turns): the unexported lengths are int32s packed beside the bools.
func TestRequestSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the size is a 64-bit platform's")
	}
	if n := unsafe.Sizeof(Request{}); n != 256 {
		t.Fatalf("a Request is %d bytes, want 256", n)
	}
}
