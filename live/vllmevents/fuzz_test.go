package vllmevents

import (
	"bytes"
	"math"
	"reflect"
	"testing"
)

// FuzzBatchRoundTrip: whatever DecodeBatch accepts encodes, in either format, to a payload that decodes
// to the same batch and encodes to the same bytes again.
func FuzzBatchRoundTrip(f *testing.F) {
	for _, m := range []bool{false, true} {
		p, err := EncodeBatch(sampleBatch(), m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(p, !m)
	}
	f.Add([]byte(wantArray), false)
	f.Add([]byte(wantMap), true)
	f.Add([]byte("\x93\xcb\x7f\xf8\x00\x00\x00\x00\x00\x01\x90\x00"), false)    // a NaN timestamp, no events
	f.Add([]byte("\x82\xa2ts\x01\xa6events\x91\x91\xb0AllBlocksCleared"), true) // a batch as a map
	f.Add([]byte("\x93\x00\xdd\xff\xff\xff\xff"), false)                        // an array claiming 2^32-1 events
	f.Fuzz(func(t *testing.T, payload []byte, mapFormat bool) {
		b, err := DecodeBatch(payload)
		if err != nil {
			return
		}
		enc, err := EncodeBatch(b, mapFormat)
		if err != nil {
			t.Fatalf("decoded %+v, which does not encode: %v", b, err)
		}
		b2, err := DecodeBatch(enc)
		if err != nil {
			t.Fatalf("re-encoded %x does not decode: %v", enc, err)
		}
		if !sameBatch(b, b2) {
			t.Fatalf("decoded %+v\nre-encoded and decoded %+v", b, b2)
		}
		if enc2, _ := EncodeBatch(b2, mapFormat); !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ:\n%x\n%x", enc, enc2)
		}
	})
}

// sameBatch is reflect.DeepEqual, but for a NaN timestamp equal to itself.
func sameBatch(a, b Batch) bool {
	if math.Float64bits(a.TS) != math.Float64bits(b.TS) {
		return false
	}
	a.TS, b.TS = 0, 0
	return reflect.DeepEqual(a, b)
}
