package vllmevents

import (
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func sampleBatch() Batch {
	parent := uint64(7)
	return Batch{
		TS: 1.5,
		Events: []Event{
			BlockStored{BlockHashes: []uint64{1, math.MaxUint64}, TokenIDs: []uint32{1, 2}, BlockSize: 2,
				Medium: MediumGPU},
			BlockStored{BlockHashes: []uint64{300}, ParentBlockHash: &parent, TokenIDs: []uint32{70000},
				BlockSize: 1, LoraID: 3, Medium: MediumGPU, LoraName: "ad"},
			BlockRemoved{BlockHashes: []uint64{300}, Medium: MediumGPU},
			AllBlocksCleared{},
		},
		DPRank: 1,
	}
}

// The expected payloads are written out by hand from the msgpack spec, the way msgspec encodes
// vLLM's structs.
const (
	ts15   = "\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00" // float64 1.5
	maxU64 = "\xcf\xff\xff\xff\xff\xff\xff\xff\xff"
	gpu    = "\xa3GPU"

	wantArray = "\x93" + ts15 + "\x94" +
		"\x98" + "\xabBlockStored" + "\x92\x01" + maxU64 + "\xc0" + "\x92\x01\x02" + "\x02" + "\xc0" + gpu +
		"\xc0" +
		"\x98" + "\xabBlockStored" + "\x91\xcd\x01\x2c" + "\x07" + "\x91\xce\x00\x01\x11\x70" + "\x01" + "\x03" +
		gpu + "\xa2ad" +
		"\x93" + "\xacBlockRemoved" + "\x91\xcd\x01\x2c" + gpu +
		"\x91" + "\xb0AllBlocksCleared" +
		"\x01"

	wantMap = "\x93" + ts15 + "\x94" +
		"\x88" + "\xa4type\xabBlockStored" + "\xacblock_hashes\x92\x01" + maxU64 + "\xb1parent_block_hash\xc0" +
		"\xa9token_ids\x92\x01\x02" + "\xaablock_size\x02" + "\xa7lora_id\xc0" + "\xa6medium" + gpu +
		"\xa9lora_name\xc0" +
		"\x88" + "\xa4type\xabBlockStored" + "\xacblock_hashes\x91\xcd\x01\x2c" + "\xb1parent_block_hash\x07" +
		"\xa9token_ids\x91\xce\x00\x01\x11\x70" + "\xaablock_size\x01" + "\xa7lora_id\x03" + "\xa6medium" + gpu +
		"\xa9lora_name\xa2ad" +
		"\x83" + "\xa4type\xacBlockRemoved" + "\xacblock_hashes\x91\xcd\x01\x2c" + "\xa6medium" + gpu +
		"\x81" + "\xa4type\xb0AllBlocksCleared" +
		"\x01"
)

func TestEncodeBatchBytes(t *testing.T) {
	for _, c := range []struct {
		mapFormat bool
		want      string
	}{{false, wantArray}, {true, wantMap}} {
		got, err := EncodeBatch(sampleBatch(), c.mapFormat)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("map format %v:\n got % x\nwant % x", c.mapFormat, got, c.want)
		}
		back, err := DecodeBatch(got)
		if err != nil {
			t.Fatalf("map format %v: %v", c.mapFormat, err)
		}
		if !reflect.DeepEqual(back, sampleBatch()) {
			t.Errorf("map format %v: round trip gave %+v", c.mapFormat, back)
		}
	}
	if _, err := EncodeBatch(Batch{Events: []Event{nil}}, false); err == nil {
		t.Error("a nil event encoded")
	}
}

func TestEncodeIntegerWidths(t *testing.T) {
	for _, c := range []struct {
		v    int64
		want string
	}{
		{0, "\x00"}, {127, "\x7f"}, {128, "\xcc\x80"}, {255, "\xcc\xff"}, {256, "\xcd\x01\x00"},
		{65536, "\xce\x00\x01\x00\x00"}, {1 << 32, "\xcf\x00\x00\x00\x01\x00\x00\x00\x00"},
		{-1, "\xff"}, {-32, "\xe0"}, {-33, "\xd0\xdf"}, {-129, "\xd1\xff\x7f"},
		{-32769, "\xd2\xff\xff\x7f\xff"}, {math.MinInt64, "\xd3\x80\x00\x00\x00\x00\x00\x00\x00"},
	} {
		if got := string(appendInt(nil, c.v)); got != c.want {
			t.Errorf("appendInt(%d) = % x, want % x", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		n    int
		want string
	}{{31, "\xbf"}, {32, "\xd9\x20"}, {256, "\xda\x01\x00"}, {65536, "\xdb\x00\x01\x00\x00"}} {
		if got := string(appendStr(nil, strings.Repeat("x", c.n))[:len(c.want)]); got != c.want {
			t.Errorf("string of %d bytes starts % x, want % x", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		n         int
		arr, dict string
	}{
		{15, "\x9f", "\x8f"},
		{16, "\xdc\x00\x10", "\xde\x00\x10"},
		{65536, "\xdd\x00\x01\x00\x00", "\xdf\x00\x01\x00\x00"},
	} {
		if got := string(appendArrayLen(nil, c.n)); got != c.arr {
			t.Errorf("array header %d = % x, want % x", c.n, got, c.arr)
		}
		if got := string(appendMapLen(nil, c.n)); got != c.dict {
			t.Errorf("map header %d = % x, want % x", c.n, got, c.dict)
		}
	}
}

// TestDecodeOtherShapes decodes payloads as other vLLM versions and settings send them.
func TestDecodeOtherShapes(t *testing.T) {
	digest := "\xc4\x20" + strings.Repeat("\x00", 24) + "\x01\x02\x03\x04\x05\x06\x07\x08"
	for _, c := range []struct {
		name    string
		payload string
		want    Batch
	}{
		{
			// vLLM 0.9: no data_parallel_rank, BlockStored without medium, BlockRemoved without medium,
			// and a negative hash from Python's hash().
			name: "old arrays",
			payload: "\x92" + ts15 + "\x92" +
				"\x96\xabBlockStored\x91\xff\xc0\x91\x05\x01\xc0" +
				"\x92\xacBlockRemoved\x91\x05",
			want: Batch{TS: 1.5, Events: []Event{
				BlockStored{BlockHashes: []uint64{math.MaxUint64}, TokenIDs: []uint32{5}, BlockSize: 1},
				BlockRemoved{BlockHashes: []uint64{5}},
			}},
		},
		{
			// Newer fields after lora_name (extra_keys, group_idx, kv_cache_spec_kind) and hashes as bytes
			// (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0).
			name: "longer arrays, byte hashes",
			payload: "\x93" + ts15 + "\x91" +
				"\x9b\xabBlockStored\x91" + digest + digest + "\x91\x05\x01\xc0" + gpu + "\xc0" +
				"\x91\xc0\x00\xaefull_attention" +
				"\x00",
			want: Batch{TS: 1.5, Events: []Event{
				BlockStored{BlockHashes: []uint64{0x0102030405060708}, ParentBlockHash: ptr(0x0102030405060708),
					TokenIDs: []uint32{5}, BlockSize: 1, Medium: MediumGPU},
			}},
		},
		{
			// vLLM v0.26 maps: keys it adds by now, one we do not know, "type" not first.
			name: "maps with more keys",
			payload: "\x93" + ts15 + "\x92" +
				"\x8b\xa4type\xabBlockStored\xacblock_hashes\x91\x09\xb1parent_block_hash\xc0" +
				"\xa9token_ids\x91\x05\xaablock_size\x01\xa7lora_id\xc0\xa6medium" + gpu + "\xa9lora_name\xc0" +
				"\xaaextra_keys\x91\xc0\xa9group_idx\x00\xb2kv_cache_spec_kind\xaefull_attention" +
				"\x83\xacblock_hashes\x91\x09\xa4type\xacBlockRemoved\xa6medium" + gpu +
				"\x02",
			want: Batch{TS: 1.5, Events: []Event{
				BlockStored{BlockHashes: []uint64{9}, TokenIDs: []uint32{5}, BlockSize: 1, Medium: MediumGPU},
				BlockRemoved{BlockHashes: []uint64{9}, Medium: MediumGPU},
			}, DPRank: 2},
		},
		{
			name: "map envelope",
			payload: "\x83\xa2ts" + ts15 + "\xa6events\x91\x81\xa4type\xb0AllBlocksCleared" +
				"\xb2data_parallel_rank\x03",
			want: Batch{TS: 1.5, Events: []Event{AllBlocksCleared{}}, DPRank: 3},
		},
	} {
		got, err := DecodeBatch([]byte(c.payload))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func ptr(v uint64) *uint64 { return &v }

func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct{ why, payload string }{
		{"empty", ""},
		{"batch without events", "\x91" + ts15},
		{"unknown tag", "\x93" + ts15 + "\x91\x91\xa4Nope\x00"},
		{"map event without a type", "\x93" + ts15 + "\x91\x80\x00"},
		{"BlockStored without token_ids", "\x93" + ts15 + "\x91\x92\xabBlockStored\x90"},
		{"nil hash", "\x93" + ts15 + "\x91\x93\xacBlockRemoved\x91\xc0\xc0\x00"},
		{"token id 2^32", "\x93" + ts15 + "\x91\x96\xabBlockStored\x90\xc0\x91" +
			"\xcf\x00\x00\x00\x01\x00\x00\x00\x00\x01\xc0\x00"},
		{"more events than bytes", "\x93" + ts15 + "\xdd\xff\xff\xff\xff"},
	} {
		if b, err := DecodeBatch([]byte(c.payload)); err == nil {
			t.Errorf("%s: decoded to %+v", c.why, b)
		}
	}
}

// A string or binary declaring more bytes than the payload holds is refused before it is allocated:
// the msgpack package would allocate the declared size first (found by FuzzBatchRoundTrip).
func TestDecodeHugeLengths(t *testing.T) {
	for _, c := range []struct{ why, payload string }{
		{"4 GiB tag", "\x93" + ts15 + "\x91\x91\xdb\xff\xff\xff\xff"},
		{"4 GiB binary hash", "\x93" + ts15 + "\x91\x93\xacBlockRemoved\x91\xc6\xff\xff\xff\xff"},
		{"4 GiB map key", "\x83\xdb\xff\xff\xff\xff"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := DecodeBatch([]byte(c.payload))
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "4294967295 bytes in a") {
			t.Errorf("%s: error %v, want the length refused", c.why, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: %d bytes allocated", c.why, n)
		}
	}
}
