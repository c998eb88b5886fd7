// Package vllmevents publishes KV-cache events the way vLLM does, so that indexers written for vLLM
// (llm-d's KV-cache indexer, Dynamo's vLLM relay, vLLM's own example subscriber) read a mocker's events
// unchanged. Everything here follows vLLM's sources: vllm/distributed/kv_events.py (wire format and
// publisher), vllm/v1/core/kv_cache_utils.py (hash_block_tokens, init_none_hash, maybe_convert_block_hash)
// and vllm/utils/hashing.py (sha256_cbor).
//
// # Block hashes
//
// vLLM's prefix-cache hash "sha256_cbor" is SHA-256 over canonical CBOR. A chain's first parent is
// NONE_HASH = sha256(CBOR(seed)), the seed being the PYTHONHASHSEED string as a CBOR text string. Block i
// hashes the 3-tuple (parent's 32-byte hash, tuple of the block's token ids, extra_keys): a CBOR array of a
// byte string, an array of unsigned ints and, for a request without LoRA, multimodal input or cache salt,
// null. Only full blocks are hashed. Events carry the 64-bit form of a hash, the digest read as a
// big-endian integer and masked to 64 bits, i.e. its last 8 bytes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1,
// vLLM's default).
//
// # Wire format
//
// Each batch is one ZMQ multipart message [topic, seq, payload] on a PUB socket: the topic as given, the
// batch's sequence number as 8 bytes big-endian (the first batch is 0) and the msgpack payload. The
// payload is msgspec's encoding of KVEventBatch, an array [ts float64, events, data_parallel_rank] (the
// publisher always fills in its rank). vLLM has two event encodings:
//
//   - array (vLLM before PR #42892): each event a tagged array, the class name first, every field in
//     declaration order (msgspec does not omit defaults from arrays):
//     ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name],
//     ["BlockRemoved", block_hashes, medium], ["AllBlocksCleared"]. This is the schema from lora_name
//     (PR #27577) until extra_keys (PR #33304), the longest layout that fixed-length decoders accept.
//   - map (vLLM PR #42892 on): each event a map in the same field order, the tag first under "type":
//     {"type": "BlockStored", "block_hashes": ..., ..., "lora_name": ...}. Fields declared with a default
//     (extra_keys, group_idx, kv_cache_spec_kind, ...) are left out, as msgspec's omit_defaults does for
//     None; map decoders take their defaults.
//
// msgpack integers, strings, arrays and maps use their shortest forms and ts is always a float64, as
// msgspec writes them, so a payload is byte-for-byte what vLLM would send for the same batch.
//
// # Replay
//
// Batches are also kept in a ring buffer (vLLM's buffer_steps, 10000 by default) served on an optional
// ROUTER socket. A client (REQ or DEALER) sends the first sequence number it wants as 8 bytes big-endian;
// the ROUTER sees [identity, "", seq]. For every buffered batch with a sequence number at least that, it
// answers [identity, "", topic, seq, payload], then ends with [identity, "", "", 0xFF×8, ""] (seq -1).
// The topic frame in replies is vLLM's layout since PR #45177 (v0.26).
package vllmevents
