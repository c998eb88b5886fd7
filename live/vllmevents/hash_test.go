package vllmevents

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digest(t *testing.T, s string) [32]byte {
	t.Helper()
	var d [32]byte
	if copy(d[:], unhex(t, s)) != 32 {
		t.Fatalf("%q is not 32 bytes", s)
	}
	return d
}

// The expected digests were computed apart from this package: with python3's hashlib over the CBOR bytes
// written out below, e.g.
//
//	python3 -c "import hashlib; print(hashlib.sha256(bytes.fromhex('6130')).hexdigest())"
//
// and they agree with the golden vectors that loxilb-io/loxilb-inference-gateway generated with cbor2 and
// vLLM v0.17.0's own functions (cicd/common/kv_hash/fixtures/kv_hash_vectors.json).
const (
	noneHashSeed0 = "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e"
	// Seed "" (CBOR 60) and DefaultSeed (CBOR 6e "vllm-none-hash").
	noneHashEmpty   = "8d33f520a3c4cef80d2453aef81b612bfe1cb44c8b2025630ad38662763f13d3"
	noneHashDefault = "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0"
)

func TestNoneHash(t *testing.T) {
	// CBOR of the text "0": major type 3, length 1, then the byte '0'.
	if got := appendSeed(nil, "0"); !bytes.Equal(got, []byte{0x61, 0x30}) {
		t.Fatalf("CBOR of seed \"0\" = % x, want 61 30", got)
	}
	for _, c := range []struct{ seed, want string }{
		{"0", noneHashSeed0},
		{"", noneHashEmpty},
		{DefaultSeed, noneHashDefault},
	} {
		if got := NewHasher(c.seed).NoneHash(); got != digest(t, c.want) {
			t.Errorf("NoneHash(%q) = %x, want %s", c.seed, got, c.want)
		}
	}
}

func TestBlockIntWidths(t *testing.T) {
	parent := digest(t, noneHashSeed0)
	// One token id per CBOR integer width: 0 and 23 fit the initial byte, 24 and 255 take one more byte,
	// 256 and 65535 two, 65536 and 2^32-1 four.
	tokens := []uint32{0, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1}
	want := "83" + // array of 3
		"5820" + noneHashSeed0 + // 32-byte parent
		"88" + "00" + "17" + "1818" + "18ff" + "190100" + "19ffff" + "1a00010000" + "1affffffff" +
		"f6" // None
	if got := appendBlock(nil, &parent, tokens); hex.EncodeToString(got) != want {
		t.Fatalf("CBOR =\n%x\nwant\n%s", got, want)
	}
	const digestHex = "39532d759036eca7efd7a6e039e216836a50436ef6b04f2f261c9e2f453fb3ec" // python3 hashlib
	h := NewHasher("0").Block(parent, tokens)
	if h != digest(t, digestHex) {
		t.Fatalf("Block = %x, want %s", h, digestHex)
	}
	if got, want := External(h), uint64(2746243798651614188); got != want {
		t.Errorf("External = %d, want %d", got, want)
	}
}

// TestChainGolden checks two chained 16-token blocks against loxilb's cbor2/vLLM golden vectors.
func TestChainGolden(t *testing.T) {
	tokens := make([]uint32, 0, 40)
	for i := range 32 {
		tokens = append(tokens, uint32(101*(i+1)))
	}
	tokens = append(tokens, 1, 2, 3) // a partial block, not hashed
	h := NewHasher("0")
	none := h.NoneHash()
	wantCBOR := "835820" + noneHashSeed0 + "90186518ca19012f1901941901f919025e1902c319032819038d1903f2" +
		"1904571904bc1905211905861905eb190650f6"
	if got := appendBlock(nil, &none, tokens[:16]); hex.EncodeToString(got) != wantCBOR {
		t.Fatalf("CBOR of block 0 =\n%x\nwant\n%s", got, wantCBOR)
	}
	chain := h.AppendChain(nil, tokens, 16)
	want := []struct {
		digest string
		ext    uint64
	}{
		{"d450abdaf2c9ebdd0e0cbfbc4e24a5c07ff71dcab37be7426d4fa0e5fdb93342", 7876691182959014722},
		{"0d95d2dc02f528b32afbd33ebffedd911ed1978087b0a01679b4ddd62261c5db", 8769878286166771163},
	}
	if len(chain) != len(want) {
		t.Fatalf("%d blocks, want %d", len(chain), len(want))
	}
	for i, w := range want {
		if chain[i] != digest(t, w.digest) || External(chain[i]) != w.ext {
			t.Errorf("block %d = %x (%d), want %s (%d)", i, chain[i], External(chain[i]), w.digest, w.ext)
		}
	}
	if got := h.Block(chain[0], tokens[16:32]); got != chain[1] {
		t.Errorf("Block(chain[0], block 1) = %x, want %x", got, chain[1])
	}
}

// TestCBORMatchesLibrary compares the hand-written encoding with fxamacker/cbor's canonical one.
func TestCBORMatchesLibrary(t *testing.T) {
	enc, err := cbor.CanonicalEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	// Token ids whose CBOR takes 1, 2, 3 and 5 bytes, and uniform ones.
	maxByWidth := []uint32{23, 255, 65535, 1<<32 - 1}
	for i := range 400 {
		var parent [32]byte
		for j := range parent {
			parent[j] = byte(rng.Uint32())
		}
		n := []int{0, 1, 16, 23, 24, 255, 256, 300}[i%8]
		tokens := make([]uint32, n)
		for j := range tokens {
			if i%5 == 4 {
				tokens[j] = rng.Uint32()
			} else {
				hi := maxByWidth[rng.IntN(len(maxByWidth))]
				tokens[j] = uint32(rng.Uint64N(uint64(hi) + 1))
			}
		}
		want, err := enc.Marshal([]any{parent[:], tokens, nil})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendBlock(nil, &parent, tokens); !bytes.Equal(got, want) {
			t.Fatalf("case %d (%d tokens): got\n%x\nwant\n%x", i, n, got, want)
		}
	}
	for _, seed := range []string{"", "0", "42", DefaultSeed, "é€", strings.Repeat("s", 23),
		strings.Repeat("s", 24), strings.Repeat("s", 255), strings.Repeat("s", 256), strings.Repeat("s", 70000)} {
		want, err := enc.Marshal(seed)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSeed(nil, seed); !bytes.Equal(got, want) {
			t.Fatalf("seed of %d bytes: got % x..., want % x...", len(seed), got[:4], want[:4])
		}
		if NewHasher(seed).NoneHash() != sha256.Sum256(want) {
			t.Fatalf("NoneHash of a %d-byte seed", len(seed))
		}
	}
}

func TestAppendChain(t *testing.T) {
	h := NewHasher("42")
	tokens := make([]uint32, 100)
	for i := range tokens {
		tokens[i] = uint32(i * 1000)
	}
	chain := h.AppendChain(nil, tokens, 32) // 3 full blocks, 4 tokens left over
	if len(chain) != 3 {
		t.Fatalf("%d blocks, want 3", len(chain))
	}
	parent := h.NoneHash()
	for i, got := range chain {
		want := h.Block(parent, tokens[32*i:32*(i+1)])
		if got != want {
			t.Errorf("block %d = %x, want %x", i, got, want)
		}
		parent = want
	}
	if got := h.AppendChain(chain[:1], tokens[:31], 32); len(got) != 1 {
		t.Errorf("a partial block produced a hash")
	}
	defer func() {
		if recover() == nil {
			t.Error("block size 0 did not panic")
		}
	}()
	h.AppendChain(nil, tokens, 0)
}

func TestBlockDoesNotAllocate(t *testing.T) {
	h := NewHasher("0")
	tokens := make([]uint32, 256)
	for i := range tokens {
		tokens[i] = uint32(i) << 10
	}
	parent := h.Block(h.NoneHash(), tokens) // grows the buffer once
	if n := testing.AllocsPerRun(100, func() { parent = h.Block(parent, tokens) }); n != 0 {
		t.Errorf("Block allocates %v times per call", n)
	}
}

// TestLoRABlock: a LoRA request's block hashes its adapter's name as vLLM's extra keys, the 1-tuple
// (lora_name,); the base model's ("") is Block's.
func TestLoRABlock(t *testing.T) {
	parent := digest(t, noneHashSeed0)
	// CBOR: [parent, [1, 2, 3, 4], ["sql-lora"]] (81: array of 1, 68: text of 8 bytes); digest by python3
	// hashlib over these bytes.
	const digestHex = "8f9afed63606909cc2ce3ca7179bda617be725f58352aac29d39fcc163208ef4"
	h := NewHasher("0")
	got := h.LoRABlock(parent, []uint32{1, 2, 3, 4}, "sql-lora")
	if got != digest(t, digestHex) {
		t.Fatalf("LoRABlock = %x, want %s", got, digestHex)
	}
	if External(got) != 11329364245149159156 {
		t.Errorf("External = %d", External(got))
	}
	if h.LoRABlock(parent, []uint32{1, 2, 3, 4}, "") != h.Block(parent, []uint32{1, 2, 3, 4}) {
		t.Error("the base model's LoRABlock differs from Block")
	}
}
