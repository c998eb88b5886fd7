package vllmevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// MediumGPU is the medium vLLM's GPU prefix cache reports (MEDIUM_GPU).
const MediumGPU = "GPU"

// An Event is one of BlockStored, BlockRemoved and AllBlocksCleared.
type Event interface {
	appendTo(b []byte, mapFormat bool) []byte
}

// BlockStored says full blocks entered the prefix cache, in chain order.
type BlockStored struct {
	BlockHashes     []uint64 // 64-bit forms (see External), first block first
	ParentBlockHash *uint64  // the block before the first; nil when the first block starts its sequence
	TokenIDs        []uint32 // the blocks' tokens, BlockSize per block
	BlockSize       int
	LoraID          int    // 0 for none: vLLM's LoRA ids start at 1
	Medium          string // MediumGPU, or "" for none
	LoraName        string // "" for none
}

// BlockRemoved says blocks left the prefix cache.
type BlockRemoved struct {
	BlockHashes []uint64
	Medium      string
}

// AllBlocksCleared says the whole prefix cache was reset.
type AllBlocksCleared struct{}

// A Batch is one published message: the events of one engine step.
type Batch struct {
	TS     float64 // Unix time in seconds
	Events []Event
	DPRank int // data-parallel rank of the engine; a Publisher stamps its own
}

// Field names in declaration order, which is also the array layout after the tag.
var (
	storedFields = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
		"lora_name"}
	removedFields = []string{"block_hashes", "medium"}
)

func (e BlockStored) appendTo(b []byte, m bool) []byte {
	b = appendEventHead(b, m, "BlockStored", len(storedFields))
	b = appendHashes(appendKey(b, m, "block_hashes"), e.BlockHashes)
	b = appendKey(b, m, "parent_block_hash")
	if e.ParentBlockHash == nil {
		b = appendNil(b)
	} else {
		b = appendUint(b, *e.ParentBlockHash)
	}
	b = appendArrayLen(appendKey(b, m, "token_ids"), len(e.TokenIDs))
	for _, t := range e.TokenIDs {
		b = appendUint(b, uint64(t))
	}
	b = appendInt(appendKey(b, m, "block_size"), int64(e.BlockSize))
	b = appendKey(b, m, "lora_id")
	if e.LoraID == 0 {
		b = appendNil(b)
	} else {
		b = appendInt(b, int64(e.LoraID))
	}
	b = appendOptStr(appendKey(b, m, "medium"), e.Medium)
	return appendOptStr(appendKey(b, m, "lora_name"), e.LoraName)
}

func (e BlockRemoved) appendTo(b []byte, m bool) []byte {
	b = appendEventHead(b, m, "BlockRemoved", len(removedFields))
	b = appendHashes(appendKey(b, m, "block_hashes"), e.BlockHashes)
	return appendOptStr(appendKey(b, m, "medium"), e.Medium)
}

func (AllBlocksCleared) appendTo(b []byte, m bool) []byte {
	return appendEventHead(b, m, "AllBlocksCleared", 0)
}

// EncodeBatch returns b's msgpack payload: events as tagged arrays, or as tagged maps if mapFormat.
func EncodeBatch(b Batch, mapFormat bool) ([]byte, error) {
	p := appendFloat(appendArrayLen(nil, 3), b.TS)
	p = appendArrayLen(p, len(b.Events))
	for i, e := range b.Events {
		if e == nil {
			return nil, fmt.Errorf("vllmevents: event %d is nil", i)
		}
		p = e.appendTo(p, mapFormat)
	}
	return appendInt(p, int64(b.DPRank)), nil
}

// appendEventHead starts an event of the given number of fields after its tag.
func appendEventHead(b []byte, m bool, tag string, fields int) []byte {
	if m {
		return appendStr(appendStr(appendMapLen(b, fields+1), "type"), tag)
	}
	return appendStr(appendArrayLen(b, fields+1), tag)
}

// appendKey writes a field's name in the map format; the array format identifies fields by position.
func appendKey(b []byte, m bool, name string) []byte {
	if m {
		return appendStr(b, name)
	}
	return b
}

func appendHashes(b []byte, hs []uint64) []byte {
	b = appendArrayLen(b, len(hs))
	for _, h := range hs {
		b = appendUint(b, h)
	}
	return b
}

// The msgpack writers below choose the shortest form, as msgspec does.

func appendNil(b []byte) []byte { return append(b, 0xc0) }

func appendFloat(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v < 0x80:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// appendOptStr writes "" as nil: vLLM's optional strings are None or non-empty.
func appendOptStr(b []byte, s string) []byte {
	if s == "" {
		return appendNil(b)
	}
	return appendStr(b, s)
}

func appendArrayLen(b []byte, n int) []byte { return appendLen(b, 0x90, 0xdc, n) }

func appendMapLen(b []byte, n int) []byte { return appendLen(b, 0x80, 0xde, n) }

// appendLen writes a container header: fix is the 4-bit form's base, c16 the 16-bit form's code (the
// 32-bit form's is next).
func appendLen(b []byte, fix, c16 byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, c16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, c16+1), uint32(n))
}

// DecodeBatch parses a payload from vLLM or from EncodeBatch. It accepts both event formats (even mixed
// in one batch), the older layouts with fewer trailing fields (no medium, no lora_name, no
// data_parallel_rank, which decode as zero values), later fields and map keys it does not know (skipped),
// hashes sent as bytes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0, converted as vLLM would) and a batch
// encoded as a map.
func DecodeBatch(p []byte) (Batch, error) {
	d := decoder{msgpack.NewDecoder(bytes.NewReader(p)), len(p)}
	b, err := d.batch()
	if err != nil {
		return Batch{}, fmt.Errorf("vllmevents: decoding batch: %w", err)
	}
	return b, nil
}

// A decoder reads one payload; max bounds preallocation, since no element takes less than a byte.
type decoder struct {
	*msgpack.Decoder
	max int
}

var errNull = errors.New("unexpected nil")

func (d decoder) batch() (Batch, error) {
	var b Batch
	if d.isMap() {
		return b, d.mapFields(func(k string) error { return d.batchField(&b, k) })
	}
	n, err := d.DecodeArrayLen()
	if err == nil && n < 2 {
		err = fmt.Errorf("batch has %d fields, want at least 2", n)
	}
	for i, k := range []string{"ts", "events", "data_parallel_rank"} {
		if i < n && err == nil {
			err = d.batchField(&b, k)
		}
	}
	return b, d.skip(n-3, err)
}

func (d decoder) batchField(b *Batch, k string) (err error) {
	switch k {
	case "ts":
		b.TS, err = d.DecodeFloat64()
	case "events":
		var n int
		if n, err = d.length(); err != nil {
			return err
		}
		b.Events = nil // an empty list is nil, as an absent one; a repeated key replaces
		if n > 0 {
			b.Events = make([]Event, 0, n)
		}
		for range n {
			e, err := d.event()
			if err != nil {
				return err
			}
			b.Events = append(b.Events, e)
		}
	case "data_parallel_rank":
		if d.null() {
			return d.DecodeNil()
		}
		b.DPRank, err = d.DecodeInt()
	default:
		err = d.Skip()
	}
	return err
}

// fields collects an event's fields, whatever its tag, in either format.
type fields struct {
	tag                  string
	hashes               []uint64
	parent               *uint64
	tokens               []uint32
	blockSize, loraID    int
	medium, loraName     string
	sawHashes, sawTokens bool
	sawBlockSize         bool
}

func (d decoder) event() (Event, error) {
	var f fields
	if d.isMap() {
		if err := d.mapFields(func(k string) error { return d.field(&f, k) }); err != nil {
			return nil, err
		}
	} else {
		n, err := d.DecodeArrayLen()
		if err != nil {
			return nil, err
		}
		if n < 1 {
			return nil, errors.New("event without a tag")
		}
		if f.tag, err = d.str(); err != nil {
			return nil, err
		}
		var layout []string
		switch f.tag {
		case "BlockStored":
			layout = storedFields
		case "BlockRemoved":
			layout = removedFields
		}
		for i := 1; i < n && i <= len(layout) && err == nil; i++ {
			err = d.field(&f, layout[i-1])
		}
		if err = d.skip(n-1-len(layout), err); err != nil {
			return nil, err
		}
	}
	switch f.tag {
	case "BlockStored":
		if !f.sawHashes || !f.sawTokens || !f.sawBlockSize {
			return nil, errors.New("BlockStored without block_hashes, token_ids or block_size")
		}
		return BlockStored{f.hashes, f.parent, f.tokens, f.blockSize, f.loraID, f.medium, f.loraName}, nil
	case "BlockRemoved":
		if !f.sawHashes {
			return nil, errors.New("BlockRemoved without block_hashes")
		}
		return BlockRemoved{f.hashes, f.medium}, nil
	case "AllBlocksCleared":
		return AllBlocksCleared{}, nil
	}
	return nil, fmt.Errorf("unknown event type %q", f.tag)
}

func (d decoder) field(f *fields, k string) (err error) {
	switch k {
	case "type":
		f.tag, err = d.str()
	case "block_hashes":
		f.sawHashes = true
		var n int
		if n, err = d.length(); err != nil {
			return err
		}
		f.hashes = make([]uint64, n)
		for i := range f.hashes {
			if f.hashes[i], err = d.hash(); err != nil {
				return err
			}
		}
	case "parent_block_hash":
		if d.null() {
			return d.DecodeNil()
		}
		var h uint64
		h, err = d.hash()
		f.parent = &h
	case "token_ids":
		f.sawTokens = true
		var n int
		if n, err = d.length(); err != nil {
			return err
		}
		f.tokens = make([]uint32, n)
		for i := range f.tokens {
			var t uint64
			if t, err = d.uint(); err != nil {
				return err
			}
			if t > math.MaxUint32 {
				return fmt.Errorf("token id %d out of range", t)
			}
			f.tokens[i] = uint32(t)
		}
	case "block_size":
		f.sawBlockSize = true
		f.blockSize, err = d.DecodeInt()
	case "lora_id":
		if d.null() {
			return d.DecodeNil()
		}
		f.loraID, err = d.DecodeInt()
	case "medium":
		f.medium, err = d.optStr()
	case "lora_name":
		f.loraName, err = d.optStr()
	default:
		err = d.Skip()
	}
	return err
}

// hash reads a block hash: an integer (negative ones come from vLLM's old Python hash() and are taken
// modulo 2^64) or the raw digest, of which vLLM's integer form keeps the last 8 bytes.
func (d decoder) hash() (uint64, error) {
	c, err := d.PeekCode()
	if err != nil || !msgpcode.IsBin(c) {
		return d.uint()
	}
	raw, err := d.bytes()
	var h uint64
	for _, x := range raw[max(0, len(raw)-8):] {
		h = h<<8 | uint64(x)
	}
	return h, err
}

// uint reads an integer that may not be nil (the msgpack package would read nil as 0).
func (d decoder) uint() (uint64, error) {
	if d.null() {
		return 0, errNull
	}
	return d.DecodeUint64()
}

func (d decoder) optStr() (string, error) {
	if d.null() {
		return "", d.DecodeNil()
	}
	return d.str()
}

func (d decoder) str() (string, error) {
	b, err := d.bytes()
	return string(b), err
}

// bytes reads a string or binary, refusing lengths the payload cannot hold: the msgpack package
// allocates the declared length before reading.
func (d decoder) bytes() ([]byte, error) {
	n, err := d.DecodeBytesLen()
	if err == nil && n > d.max {
		err = fmt.Errorf("string of %d bytes in a %d-byte payload", n, d.max)
	}
	if err != nil || n <= 0 {
		return nil, err
	}
	b := make([]byte, n)
	return b, d.ReadFull(b)
}

// length reads an array header, refusing nil and lengths the payload cannot hold.
func (d decoder) length() (int, error) {
	if d.null() {
		return 0, errNull
	}
	n, err := d.DecodeArrayLen()
	if err == nil && n > d.max {
		err = fmt.Errorf("array of %d elements in a %d-byte payload", n, d.max)
	}
	return n, err
}

func (d decoder) null() bool {
	c, err := d.PeekCode()
	return err == nil && c == msgpcode.Nil
}

func (d decoder) isMap() bool {
	c, err := d.PeekCode()
	return err == nil && (msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32)
}

// mapFields reads a map, handing each key to field to read its value.
func (d decoder) mapFields(field func(k string) error) error {
	n, err := d.DecodeMapLen()
	for i := 0; i < n && err == nil; i++ {
		var k string
		if k, err = d.str(); err == nil {
			err = field(k)
		}
	}
	return err
}

// skip skips n values (none if n <= 0) unless err is already set.
func (d decoder) skip(n int, err error) error {
	for ; n > 0 && err == nil; n-- {
		err = d.Skip()
	}
	return err
}
