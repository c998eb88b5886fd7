package book

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/sched"
)

// FuzzCheck: Check accepts a request exactly when its prompt and max_tokens fit every limit, computed
// without overflow, whatever the wire's max_tokens (up to 2^63-1) and the limits, and names the first
// limit broken.
func FuzzCheck(f *testing.F) {
	f.Add(4, 10, 0, 0, 4, 8, 0)
	f.Add(20, math.MaxInt-3, 0, 0, 4, 8, 2)
	f.Add(10, 7, 100, 16, 4, 8, 0)
	f.Add(1, math.MaxInt, math.MaxInt, math.MaxInt, 1<<10, 1<<20, 64)
	f.Fuzz(func(t *testing.T, n, maxTokens, maxModelLen, maxBatched, blockSize, numBlocks, extra int) {
		// max_tokens comes as it is; the rest is folded into what options and prompts can be.
		n = 1 + fold(n, 4096)
		maxModelLen, maxBatched = fold(maxModelLen, math.MaxInt), fold(maxBatched, math.MaxInt)
		blockSize, numBlocks, extra = 1+fold(blockSize, 1<<10), 1+fold(numBlocks, 1<<20), fold(extra, 65)
		b := newFake(t, sched.Aggregated, sched.Spec{}).b
		b.limits = Limits{MaxModelLen: maxModelLen, MaxBatchedTokens: maxBatched, BlockSize: blockSize, NumBlocks: numBlocks,
			Extra: extra, Unit: "blocks"}
		err := b.Check(request(1, n, maxTokens))

		// The reason is the first limit broken, in Check's order.
		total := new(big.Int).Add(big.NewInt(int64(n)), big.NewInt(int64(maxTokens)))
		beyond := func(limit int64) bool { return total.Cmp(big.NewInt(limit)) > 0 }
		pool := int64(blockSize)*int64(numBlocks) - int64(extra)
		want := ""
		switch {
		case maxTokens < 0:
			want = "is negative"
		case maxModelLen > 0 && beyond(int64(maxModelLen)):
			want = "exceeds max-model-len"
		case maxBatched > 0 && beyond(int64(maxBatched)):
			want = "exceeds max-num-batched-tokens"
		case beyond(pool) && maxTokens > math.MaxInt-n-extra-blockSize:
			want = "is beyond any pool"
		case beyond(pool):
			want = "KV blocks"
		}
		if err == nil && want != "" || err != nil && (want == "" || !strings.Contains(err.Error(), want)) {
			t.Fatalf("Check(prompt %d, max_tokens %d) with %+v = %v, want %q", n, maxTokens, b.limits, err, want)
		}
	})
}

// fold maps x onto [0, m).
func fold(x, m int) int {
	if x < 0 {
		x = -(x + 1)
	}
	return x % m
}
