package engine

import (
	"container/list"
	"fmt"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokens"

	"github.com/mocker-sim/mocker/timing"
)

// EncoderOptions model the vision encoder of multimodal requests (sched.Request.Images), one per rank as
// vLLM has one per engine core: an image is encoded in the pass whose prefill chunk first reaches its
// tokens, unless its tokens are all in the prefix cache already or the encoder cache holds it.
type EncoderOptions struct {
	// MsPerToken is the encoder's time per image token, added to the prefill cost of the pass that
	// encodes the image. It stands for a ViT forward over the image's patches; see config's default.
	MsPerToken float64
	// CacheTokens is the encoder cache's size in image tokens (vLLM's encoder_cache_size): encoded
	// images are kept, least recently used evicted first, so a repeated image is not encoded again.
	// An image larger than the cache is encoded and not kept; 0: nothing is kept.
	CacheTokens int
}

// EncoderStats count one rank's encoder work.
type EncoderStats struct {
	Images    int64 // images encoded
	Tokens    int64 // their tokens
	CacheHits int64 // images a pass needed that the encoder cache held
}

// encoder is one rank's vision encoder: its cache and the images of its requests.
type encoder struct {
	o     EncoderOptions
	stats EncoderStats

	reqs map[uint64]*mmRequest // requests with images
	lru  list.List             // of *cached, most recently used at the front
	keys map[uint64]*list.Element
	used int // tokens held
}

type mmRequest struct {
	images []tokens.Item
	next   int // images before it are encoded or found for the request's current prefill
}

type cached struct {
	key  uint64
	size int
}

func newEncoder(o EncoderOptions) *encoder {
	return &encoder{o: o, reqs: map[uint64]*mmRequest{}, keys: map[uint64]*list.Element{}}
}

// add records a request's images.
func (e *encoder) add(r *sched.Request) {
	if len(r.Images) > 0 {
		e.reqs[r.ID] = &mmRequest{images: r.Images}
	}
}

// pass does the encoder's share of a rank's pass and returns its time: for each prefill chunk
// [Cached, Cached+New) of a request with images, each image the chunk reaches that the request has not
// looked up yet is skipped if the cached prefix covers it, else found in the cache or encoded.
func (e *encoder) pass(p *sched.Pass) time.Duration {
	for _, a := range p.Admitted {
		if r := e.reqs[a.ID]; r != nil {
			r.next = 0 // a resumed request prefills again
		}
	}
	tokens := 0
	for k, q := range p.Batch.Seqs {
		if !q.Prefill || k >= len(p.SeqIDs) {
			continue
		}
		r := e.reqs[p.SeqIDs[k]]
		if r == nil {
			continue
		}
		end := q.Cached + q.New
		for ; r.next < len(r.images) && r.images[r.next].Start < end; r.next++ {
			im := r.images[r.next]
			if im.Start+im.Len <= q.Cached {
				continue // its tokens' KV is cached: nothing reads the encoder's output
			}
			if e.lookup(im) {
				e.stats.CacheHits++
				continue
			}
			e.stats.Images++
			e.stats.Tokens += int64(im.Len)
			tokens += im.Len
		}
	}
	for _, o := range p.Outputs {
		if o.Done {
			delete(e.reqs, o.ID)
		}
	}
	return timing.Ms(float64(tokens) * e.o.MsPerToken)
}

// lookup reports whether the cache holds im, marking it used; if not, it caches it (it is being encoded).
func (e *encoder) lookup(im tokens.Item) bool {
	if el, ok := e.keys[im.Key]; ok {
		e.lru.MoveToFront(el)
		return true
	}
	if im.Len > e.o.CacheTokens {
		return false
	}
	for e.used+im.Len > e.o.CacheTokens {
		old := e.lru.Remove(e.lru.Back()).(*cached)
		delete(e.keys, old.key)
		e.used -= old.size
	}
	e.keys[im.Key] = e.lru.PushFront(&cached{key: im.Key, size: im.Len})
	e.used += im.Len
	return false
}

// check verifies the cache's accounting.
func (e *encoder) check() error {
	sum := 0
	for el := e.lru.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*cached).size
	}
	if sum != e.used || e.used > e.o.CacheTokens || len(e.keys) != e.lru.Len() {
		return fmt.Errorf("encoder cache: %d tokens in %d entries (%d keys), counted %d, capacity %d", sum, e.lru.Len(), len(e.keys), e.used, e.o.CacheTokens)
	}
	return nil
}

// EncoderStats sums the ranks' encoder work.
func (e *Engine) EncoderStats() EncoderStats {
	var s EncoderStats
	for _, enc := range e.enc {
		if enc != nil {
			s.Images += enc.stats.Images
			s.Tokens += enc.stats.Tokens
			s.CacheHits += enc.stats.CacheHits
		}
	}
	return s
}
