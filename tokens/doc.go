// Package tokens gives token sequences their block identities.
//
// A sequence is cut into blocks of a fixed number of tokens. Each full block has two hashes, as Dynamo's
// mocker and router compute them (reference §2):
//
//   - its tokens hash: XXH3-64 with seed 1337 over the block's token ids as little-endian uint32s;
//   - its sequence hash, which also identifies everything before it: block 0's sequence hash is its tokens
//     hash; block i's is XXH3-64 (seed 1337) over the little-endian uint64 pair [sequence hash of block i−1,
//     tokens hash of block i].
//
// A request served by a LoRA adapter hashes its tokens with seed 1337 + XXH3-64(adapter name) instead
// (LoRASeed, Sequence.SetSeed; the chain keeps 1337), as Dynamo's router does, so no two adapters share a
// block.
//
// The sequence hash is a block's identity in the KV cache and in KV events; two requests share a cached
// block only if they share the whole prefix up to and including it. The trailing partial block has no
// hash: it is private to its request.
//
// Start with Sequence, which keeps only these hashes and the partial tail, so a long prompt costs 16 bytes
// per block instead of 4 bytes per token.
package tokens
