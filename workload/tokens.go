package workload

import (
	"slices"

	"github.com/mocker-sim/mocker/tokens"
)

// Token spaces. Request-unique tokens have the top bit set and shared-prefix
// tokens have it clear, so a synthetic prefix can never be matched by a
// request's own tokens. Trace tokens are the trace's hash ids, as in the
// reference, and may fall anywhere.
const (
	uniqueBit = 1 << 31
	golden    = 0x9e3779b97f4a7c15 // splitmix64 increment
)

// mix64 is the splitmix64 finaliser: a bijective, well-mixed hash of x.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// AppendTokens appends the request's InputLen synthesised prompt tokens to
// dst and returns it. It is deterministic and allocation-free when dst has
// capacity. The simulator takes the same tokens by AppendSequence, which hashes
// a trace's blocks without spelling them out; AppendTokens is their plain
// statement, which the examples print and AppendSequence is tested against.
//
// A trace row given as text has the tokens of its text. Otherwise the
// tokens are, in order: for a trace request, BlockSize copies of each
// hash id's low 32 bits (the reference's rule: hash ids [1,2], block 4, length
// 6 give [1 1 1 1 2 2]); for a synthetic request in a prefix group, the
// group's prefix tokens; then request-unique tokens for the rest — a
// splitmix64 stream keyed by Key, so they never hit a cache (with a dataset
// pool, keyed by the pool entry: requests of one entry share them). A synthetic
// request's images follow its prefix as ImageToken placeholders.
func (r *Request) AppendTokens(dst []uint32) []uint32 {
	n := max(r.InputLen, 0)
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	r.fill(dst[start:], 0)
	return dst
}

// fill writes the prompt tokens at positions from, from+1, ... into out.
func (r *Request) fill(out []uint32, from int) {
	if r.prompt != nil {
		copy(out, r.prompt[from:])
		return
	}
	i, end := from, from+len(out)
	if bs := int(r.blockSize); bs > 0 && i < len(r.hashes)*bs {
		for ; i < end && i < len(r.hashes)*bs; i++ {
			out[i-from] = r.hashes[i/bs]
		}
	}
	prefixLen := int(r.prefixLen)
	for stop := min(prefixLen, end); i < stop; i++ {
		out[i-from] = uint32(mix64(r.prefix+uint64(i)*golden)>>32) &^ uniqueBit
	}
	for stop := min(prefixLen+int(r.imageLen), end); i < stop; i++ {
		out[i-from] = ImageToken
	}
	if i < end {
		key := r.Key
		if r.entry > 0 {
			key = r.entry - 1
		}
		base := mix64(r.salt ^ (key+1)*golden)
		for ; i < end; i++ {
			out[i-from] = uint32(mix64(base+uint64(i)*golden)>>32) | uniqueBit
		}
	}
}

// PromptLen is the number of tokens AppendTokens and AppendSequence make: InputLen, or 0 if negative.
func (r *Request) PromptLen() int { return max(r.InputLen, 0) }

// AppendSequence appends the request's prompt tokens — the same as AppendTokens — to seq, feeding a
// trace's hash ids as runs of one token so that seq hashes their whole blocks without looking at the
// tokens. It is the fast way to a request's block identities when the token ids themselves are not
// needed. It declares the request's images on seq first.
func (r *Request) AppendSequence(seq *tokens.Sequence) {
	seq.AddItems(r.Images...)
	r.AppendPromptTo(seq)
}

// AppendPromptTo appends the request's prompt tokens to seq as AppendSequence does, declaring no image:
// a conversation's prompt declares none of its history's.
func (r *Request) AppendPromptTo(seq *tokens.Sequence) {
	n := max(r.InputLen, 0)
	seq.Grow(n)
	i := 0
	if bs := int(r.blockSize); bs > 0 {
		for _, h := range r.hashes {
			if i >= n {
				break
			}
			k := min(bs, n-i)
			seq.AppendRun(h, k)
			i += k
		}
	}
	var buf [512]uint32
	for i < n {
		k := min(len(buf), n-i)
		r.fill(buf[:k], i)
		seq.Append(buf[:k]...)
		i += k
	}
}
