// Package radix is SGLang's radix prefix cache over a pool of KV pages: the memory manager of an
// SGLang-style scheduler (reference dynamo-mocker.md §5, peers.md §9).
//
// The pool has NumPages pages of PageSize tokens, handed out from a free list. Pages holding the full
// pages of computed sequences live in a compressed radix tree: each Node's edge is a run of one or more
// pages, keyed by the pages' tokens hashes (tokens.Block.TokensHash; equal hashes are taken to be
// identical pages, as in the reference), and its children are looked up by their first page's tokens
// hash. A node is locked while some request uses it; locking a node locks its whole path to the root.
// Unlocked leaves are evictable, least recently used first; evicting a leaf returns all its pages to the
// free list and may make its parent an evictable leaf in turn. The root is never evicted.
//
// Every count is in pages (FreePages, CachedPages, EvictablePages, ProtectedPages, Capacity); SGLang's
// evictable_size and protected_size, in tokens, are EvictablePages and ProtectedPages times PageSize.
//
// # How a scheduler drives it
//
// Start reading at Cache.Match. For each request:
//
//  1. Admission: ids, node := Match(seq.Blocks(), nil); Lock(node). The ids are the request's cached
//     prefix, owned by the tree (MatchLen counts them without listing them, for a caller that needs only
//     how many). Alloc the rest of its pages (Evict first when FreePages is short); pages from Alloc are
//     private to the request.
//  2. When a chunk of its prompt is computed (or decoding fills a page), Extend(node, blocks[locked:full],
//     table[locked:full]) caches the new full pages below the request's node, frees its duplicates and
//     returns the new deepest node: Lock it, Unlock the old one. Equivalently, from the root: present :=
//     Insert(blocks[:full], table[:full]). Pages before present were already in the tree; those of
//     table[locked:present] (locked = the length of the prefix the request holds locked) are the
//     request's duplicates of them, and it must Free them. Then ids, node2 := Match(blocks[:full], ...)
//     gives the tree's pages for table[:full] and the new deepest node: Lock(node2), Unlock(node).
//  3. At completion: Insert its full pages the same way, Free the duplicates and its private tail (the
//     trailing partial page, pages never filled), Unlock its node. Its pages stay cached, evictable.
//     A retracted request releases the same way; without the Insert only its locked prefix stays.
//
// A node returned by Match stays valid until it is evicted: lock it to keep it. Evicted nodes are reused,
// so a caller must not use a node it does not hold locked after calling Evict.
//
// # Recency
//
// Access stamps come from a logical clock that ticks once per Match, Insert or Extend call; the call stamps
// every node on the path it walks (the part of an edge it matched: a walk that stops inside an edge first
// splits the node there, so a node's pages always share one stamp). Extend walks from a request's own
// node, so a node it adds may be newer than its ancestors; eviction takes the least recently stamped leaf
// either way, ties going to the older node.
//
// # KV events
//
// With Options.Events, Insert records one Stored event for the pages it adds to the tree (their parent
// is the sequence hash of the page before the first, none for page 0), and Evict records one Removed
// event listing the sequence hashes of every page it frees, leaves first. A page hash is in the tree at
// most once, so an indexer fed only these events holds exactly the cached pages. Event ids increase from
// 0; TakeEvents hands them over. When a consumer sees them is the scheduler's business. A consumer in
// the same process may read the cache in place instead, as the events it has heard so far describe it
// (View), however late they reach it; when it is their only consumer (View.Sole), the events count
// their pages (kvcache.Event.Count) instead of listing them.
//
// The package is pure and deterministic: no clock, no I/O, no randomness. A Cache is not safe for
// concurrent use.
package radix
