package tokens

import (
	"encoding/binary"
	"testing"

	"github.com/zeebo/xxh3"
)

const (
	prime32 = 2654435761
	prime64 = 11400714785074694797
)

// sanityBuffer is xxHash's test buffer (cli/xsum_sanity_check.c, XSUM_fillTestBuffer).
func sanityBuffer(n int) []byte {
	buf := make([]byte, n)
	gen := uint64(prime32)
	for i := range buf {
		buf[i] = byte(gen >> 56)
		gen *= prime64
	}
	return buf
}

// TestXXH3Vectors checks the library against xxHash's published XXH3_64bits test vectors
// (XSUM_XXH3_testdata), so a broken or swapped dependency cannot silently change every block hash.
func TestXXH3Vectors(t *testing.T) {
	buf := sanityBuffer(4096 + 64 + 1)
	for _, v := range []struct {
		n    int
		seed uint64
		want uint64
	}{
		{0, 0, 0x2D06800538D394C2},
		{0, prime64, 0xA8A6B918B2F0364A},
		{1, 0, 0xC44BDFF4074EECDB},
		{1, prime64, 0x032BE332DD766EF8},
		{6, 0, 0x27B56A84CD2D7325},
		{6, prime64, 0x84589C116AB59AB9},
		{12, 0, 0xA713DAF0DFBB77E7},
		{12, prime64, 0xE7303E1B2336DE0E},
		{24, 0, 0xA3FE70BF9D3510EB},
		{24, prime64, 0x850E80FC35BDD690},
		{48, 0, 0x397DA259ECBA1F11},
		{48, prime64, 0xADC2CBAA44ACC616},
		{80, 0, 0xBCDEFBBB2C47C90A},
		{80, prime64, 0xC6DD0CB699532E73},
		{195, 0, 0xCD94217EE362EC3A},
		{195, prime64, 0xBA68003D370CB3D9},
		{403, 0, 0xCDEB804D65C6DEA4},
		{403, prime64, 0x6259F6ECFD6443FD},
		{512, 0, 0x617E49599013CB6B},
		{512, prime64, 0x3CE457DE14C27708},
		{2048, 0, 0xDD59E2C3A5F038E0},
		{2048, prime64, 0x66F81670669ABABC},
		{2240, 0, 0x6E73A90539CF2948},
		{2240, prime64, 0x757BA8487D1B5247},
		{2367, 0, 0xCB37AEB9E5D361ED},
		{2367, prime64, 0xD2DB3415B942B42A},
	} {
		if got := xxh3.HashSeed(buf[:v.n], v.seed); got != v.want {
			t.Errorf("XXH3_64(len %d, seed %#x) = %#016x, want %#016x", v.n, v.seed, got, v.want)
		}
	}
}

func TestBlockHashIsLittleEndianU32(t *testing.T) {
	toks := []uint32{0, 1, 2, 0xdeadbeef, 1 << 31}
	raw := make([]byte, 0, 4*len(toks))
	for _, tok := range toks {
		raw = binary.LittleEndian.AppendUint32(raw, tok)
	}
	if got, want := BlockHash(toks), xxh3.HashSeed(raw, 1337); got != want {
		t.Fatalf("BlockHash = %#x, want XXH3(LE u32 bytes, 1337) = %#x", got, want)
	}
	// A long block (SGLang-style large pages) follows the same rule.
	big := make([]uint32, 1000)
	raw = raw[:0]
	for i := range big {
		big[i] = uint32(i * 7)
		raw = binary.LittleEndian.AppendUint32(raw, big[i])
	}
	if got, want := BlockHash(big), xxh3.HashSeed(raw, 1337); got != want {
		t.Fatalf("BlockHash(big) = %#x, want %#x", got, want)
	}
}

func TestSeqHashIsLittleEndianPair(t *testing.T) {
	raw := binary.LittleEndian.AppendUint64(nil, 0x0102030405060708)
	raw = binary.LittleEndian.AppendUint64(raw, 0x1112131415161718)
	if got, want := SeqHash(0x0102030405060708, 0x1112131415161718), xxh3.HashSeed(raw, 1337); got != want {
		t.Fatalf("SeqHash = %#x, want %#x", got, want)
	}
	if SeqHash(1, 2) == SeqHash(2, 1) {
		t.Fatal("SeqHash must depend on order")
	}
}

func BenchmarkBlockHash16(b *testing.B) {
	toks := make([]uint32, 16)
	for i := range toks {
		toks[i] = uint32(i)
	}
	b.SetBytes(64)
	for b.Loop() {
		BlockHash(toks)
	}
}

// TestLoRASeed pins the seed of a known adapter name: 1337 + XXH3-64("sql-lora") (the library is held to
// xxHash's vectors above), and the base model's seed is 1337.
func TestLoRASeed(t *testing.T) {
	if got, want := LoRASeed("sql-lora"), uint64(0x8b43147fe6fe0fda); got != want {
		t.Errorf("LoRASeed(sql-lora) = %#x, want %#x", got, want)
	}
	if got := LoRASeed("sql-lora") - Seed; got != xxh3.HashString("sql-lora") {
		t.Errorf("LoRASeed(sql-lora) - 1337 = %#x, want XXH3-64(sql-lora) %#x", got, xxh3.HashString("sql-lora"))
	}
	if got := LoRASeed(""); got != Seed {
		t.Errorf("LoRASeed(\"\") = %d, want %d", got, Seed)
	}
	if got, want := BlockHashSeed([]uint32{1, 2, 3, 4}, LoRASeed("sql-lora")), uint64(0x45e7ad99c9fa1a); got != want {
		t.Errorf("BlockHashSeed([1 2 3 4], sql-lora) = %#x, want %#x", got, want)
	}
}
