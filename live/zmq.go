package live

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/vllmevents"
	"github.com/mocker-sim/mocker/tokens"
)

// ZMQOptions configure a ZMQSink.
type ZMQOptions struct {
	Host string
	// Port is the PUB port of worker 0, rank 0; worker w's rank r publishes on Port + w×DPSize + r, as
	// vLLM offsets its port by the data-parallel rank. ReplayPort numbers the ROUTER sockets the same
	// way (0: no replay).
	Port, ReplayPort int
	// Endpoint, when set, replaces Host and Port with a vLLM kv-events endpoint and vLLM's rule
	// (vllmevents.Binds): one that binds ("tcp://*:5557") numbers the workers' ports as Port does; one
	// that connects ("tcp://indexer:5557", a subscriber that binds) is where every worker's rank r
	// connects, at its port + r.
	Endpoint        string
	Workers, DPSize int
	BlockSize       int
	HashSeed        string // vLLM's PYTHONHASHSEED
	MapFormat       bool   // msgpack maps instead of arrays
	// Topics are the workers' topics, by worker (see ExpandTopic); missing ones are "", vLLM's default.
	Topics []string
	// LoRAs are the served adapters in --lora-modules order: adapter i's lora_id is i+1, as vLLM
	// numbers the adapters it loads at startup.
	LoRAs []string
}

// ExpandTopic fills in a kv-events topic template for one worker: {host} and {port} are the address
// its HTTP API answers on, {model} the served model name, {worker} its index. llm-d's guides set vLLM's
// topic to kv@<pod IP>@<model>, and its indexer reads the pod and the model from it; kv@{host}:{port}@{model}
// makes each worker of a --worker-ports fleet a pod of its own. Any other {name} is an error.
func ExpandTopic(template, host string, port int, model string, worker int) (string, error) {
	var b strings.Builder
	for rest := template; rest != ""; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("topic %q: unclosed {", template)
		}
		switch name := rest[i+1 : i+j]; name {
		case "host":
			b.WriteString(host)
		case "port":
			b.WriteString(strconv.Itoa(port))
		case "model":
			b.WriteString(model)
		case "worker":
			b.WriteString(strconv.Itoa(worker))
		default:
			return "", fmt.Errorf("topic %q: unknown placeholder {%s} (want {host}, {port}, {model} or {worker})", template, name)
		}
		rest = rest[i+j+1:]
	}
	return b.String(), nil
}

// ZMQSink publishes KV events in vLLM's own format, so that an indexer written for vLLM (one that
// hashes prompt tokens with sha256_cbor) finds the blocks of mocker's workers. Our events name blocks
// by XXH3 sequence hashes; the sink follows every request's tokens to translate them into vLLM's
// hashes and to fill in each stored block's token ids.
type ZMQSink struct {
	o    ZMQOptions
	pubs []*vllmevents.Publisher // by worker × DPSize + rank

	mu     sync.Mutex
	hasher *vllmevents.Hasher
	blocks map[uint64]*vblock // by our sequence hash: blocks some request or the cache holds
	reqs   map[uint64]*vreq
	evs    []vllmevents.Event
	gone   []uint64 // hashes an Events call removed somewhere, forgotten after it if no one holds them
}

// vblock is one block as vLLM names it.
type vblock struct {
	hash     [32]byte
	tokens   []uint32
	lora     string // the adapter whose KV it holds
	refs     int    // requests whose token sequence contains it
	resident int    // pools (worker ranks) and their lower tiers that store it
}

// vreq follows one request's tokens.
type vreq struct {
	seq    *tokens.Sequence
	lora   string
	items  []tokens.Item // its images: their keys are the extra_keys of the blocks they overlap
	tail   []uint32      // tokens after the last full block
	parent [32]byte      // vLLM hash of the last full block (NONE_HASH before the first)
	held   []uint64      // our hashes of the blocks it references
}

// NewZMQSink binds every worker's and rank's PUB (and replay) sockets.
func NewZMQSink(o ZMQOptions) (*ZMQSink, error) {
	if o.DPSize < 1 {
		o.DPSize = 1
	}
	connect := o.Endpoint != "" && !vllmevents.Binds(o.Endpoint)
	if o.Endpoint != "" && !connect && o.Workers > 1 && !strings.HasPrefix(o.Endpoint, "tcp://") {
		return nil, fmt.Errorf("zmq kv events endpoint %q: %d workers cannot bind one non-TCP endpoint; use tcp://*:PORT", o.Endpoint, o.Workers)
	}
	s := &ZMQSink{o: o, hasher: vllmevents.NewHasher(o.HashSeed), blocks: make(map[uint64]*vblock), reqs: make(map[uint64]*vreq)}
	for w := range o.Workers {
		var topic string
		if w < len(o.Topics) {
			topic = o.Topics[w]
		}
		for r := range o.DPSize {
			// The publisher adds its rank to the ports, as vLLM does; the worker's offset is ours, except
			// where every worker connects to one subscriber.
			base := w * o.DPSize
			po := vllmevents.Options{Endpoint: endpoint(o.Host, o.Port+base), Topic: topic, MapFormat: o.MapFormat, DPRank: r, Connect: connect}
			switch {
			case connect:
				po.Endpoint = o.Endpoint
			case o.Endpoint != "" && w > 0:
				ep, err := offsetPort(o.Endpoint, base)
				if err != nil {
					s.Close()
					return nil, err
				}
				po.Endpoint = ep
			case o.Endpoint != "":
				po.Endpoint = o.Endpoint
			}
			if o.ReplayPort > 0 {
				po.ReplayEndpoint = endpoint(o.Host, o.ReplayPort+base)
			}
			p, err := vllmevents.Listen(po)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("zmq kv events of worker %d rank %d: %w", w, r, err)
			}
			s.pubs = append(s.pubs, p)
		}
	}
	return s, nil
}

func endpoint(host string, port int) string {
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// offsetPort adds n to a TCP endpoint's port.
func offsetPort(ep string, n int) (string, error) {
	i := strings.LastIndexByte(ep, ':')
	port, err := strconv.Atoi(ep[i+1:])
	if i < 0 || err != nil || port == 0 {
		return "", fmt.Errorf("zmq kv events endpoint %q: several workers need a TCP port to number theirs from", ep)
	}
	return ep[:i+1] + strconv.Itoa(port+n), nil
}

// Close closes every socket.
func (s *ZMQSink) Close() error {
	var first error
	for _, p := range s.pubs {
		if err := p.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Prompt implements Sink: it hashes the prompt's full blocks the way vLLM does, the adapter's name in
// their extra keys.
func (s *ZMQSink) Prompt(id uint64, prompt []uint32, lora string) {
	s.PromptImages(id, prompt, lora, nil)
}

// PromptImages is Prompt for a prompt with images: a block overlapping images hashes with their keys
// (in hex, as vLLM's mm hashes are strings) after the adapter's name as its extra_keys, and our names of
// its blocks carry them too.
func (s *ZMQSink) PromptImages(id uint64, prompt []uint32, lora string, images []tokens.Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &vreq{seq: tokens.NewSequence(s.o.BlockSize), lora: lora, parent: s.hasher.NoneHash(), items: images}
	if lora != "" {
		r.seq.SetSeed(tokens.LoRASeed(lora)) // our names of its blocks, as the engine's
	}
	r.seq.AddItems(images...)
	s.reqs[id] = r
	s.extend(r, prompt)
}

// Tokens implements Sink: generated tokens complete blocks too.
func (s *ZMQSink) Tokens(_ int, id uint64, toks []uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.reqs[id]; r != nil {
		s.extend(r, toks)
	}
}

// Ended implements Sink.
func (s *ZMQSink) Ended(_ int, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reqs[id]
	if r == nil {
		return
	}
	delete(s.reqs, id)
	for _, h := range r.held {
		if b := s.blocks[h]; b != nil {
			b.refs--
			if b.refs == 0 && b.resident == 0 {
				delete(s.blocks, h)
			}
		}
	}
}

// extend appends toks to r and registers the blocks they complete.
func (s *ZMQSink) extend(r *vreq, toks []uint32) {
	bs := s.o.BlockSize
	before := len(r.seq.Blocks())
	r.seq.Append(toks...)
	r.tail = append(r.tail, toks...)
	for i, blk := range r.seq.Blocks()[before:] {
		part := r.tail[i*bs : (i+1)*bs]
		b := s.blocks[blk.Hash]
		if b == nil {
			b = &vblock{hash: s.hasher.BlockExtra(r.parent, part, r.extraKeys(before+i, bs)), tokens: append([]uint32(nil), part...), lora: r.lora}
			s.blocks[blk.Hash] = b
		}
		b.refs++
		r.held = append(r.held, blk.Hash)
		r.parent = b.hash
	}
	if n := len(r.seq.Blocks()) - before; n > 0 {
		r.tail = append(r.tail[:0], r.tail[n*bs:]...)
	}
}

// extraKeys returns vLLM's extra_keys of r's block k: the adapter's name, then the keys, in hex, of r's images that overlap it.
func (r *vreq) extraKeys(k, bs int) []string {
	var keys []string
	if r.lora != "" {
		keys = append(keys, r.lora) // vLLM's order: the adapter's name, then the mm hashes
	}
	for _, it := range r.items {
		if it.Start < (k+1)*bs && it.Start+it.Len > k*bs {
			keys = append(keys, strconv.FormatUint(it.Key, 16))
		}
	}
	return keys
}

// Events implements Sink: one vLLM event batch per call.
func (s *ZMQSink) Events(worker, rank int, evs []kvcache.Event) {
	i := worker*s.o.DPSize + rank
	if i >= len(s.pubs) {
		return
	}
	s.mu.Lock()
	s.batch(evs)
	if len(s.evs) > 0 {
		// An error means the publisher is closed (shutting down): the events are dropped.
		s.pubs[i].Publish(vllmevents.Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: s.evs})
	}
	s.mu.Unlock()
}

// batch translates evs into s.evs; s.mu is held.
func (s *ZMQSink) batch(evs []kvcache.Event) {
	s.evs = s.evs[:0]
	s.gone = s.gone[:0]
	for _, e := range evs {
		if ve := s.translate(e); ve != nil {
			s.evs = append(s.evs, ve)
		}
	}
	// Forgotten only now: a block the GPU evicts is stored in the CPU tier by a later event of the batch.
	for _, h := range s.gone {
		if b := s.blocks[h]; b != nil && b.refs == 0 && b.resident == 0 {
			delete(s.blocks, h)
		}
	}
}

// translate turns one of our events into vLLM's; nil when none of its blocks is known (it cannot
// happen for blocks of requests the sink followed).
func (s *ZMQSink) translate(e kvcache.Event) vllmevents.Event {
	switch e.Kind {
	case kvcache.Stored:
		out := vllmevents.BlockStored{BlockSize: s.o.BlockSize, Medium: e.Medium.String()}
		if e.HasParent {
			if p := s.blocks[e.Parent]; p != nil {
				h := vllmevents.External(p.hash)
				out.ParentBlockHash = &h
			}
		}
		for _, blk := range e.Blocks {
			b := s.blocks[blk.Hash]
			if b == nil {
				break // the rest would not chain
			}
			b.resident++
			if b.lora != "" {
				out.LoraName = b.lora // an event's blocks are one request's, of one adapter
				out.LoraID = slices.Index(s.o.LoRAs, b.lora) + 1
			}
			out.BlockHashes = append(out.BlockHashes, vllmevents.External(b.hash))
			if e.Medium == kvcache.GPU { // vLLM's offloading connector sends a lower tier's without tokens
				out.TokenIDs = append(out.TokenIDs, b.tokens...)
			}
		}
		if len(out.BlockHashes) == 0 {
			return nil
		}
		return out
	case kvcache.Removed:
		out := vllmevents.BlockRemoved{Medium: e.Medium.String()}
		for _, h := range e.Hashes {
			b := s.blocks[h]
			if b == nil {
				continue
			}
			out.BlockHashes = append(out.BlockHashes, vllmevents.External(b.hash))
			b.resident = max(b.resident-1, 0)
			s.gone = append(s.gone, h)
		}
		if len(out.BlockHashes) == 0 {
			return nil
		}
		return out
	case kvcache.Cleared:
		// Which blocks the pool held is not tracked per pool; blocks other pools still hold must keep
		// their names, so none is forgotten here.
		return vllmevents.AllBlocksCleared{}
	}
	return nil
}
