package report

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
)

// spillFile is where a compact collector's distributions (samples) put their settled values beyond a
// bound, so that a run's memory does not grow with its length: sorted runs of (key, count), one after
// another, each key as its difference from the previous one, in varints. It is created in $TMPDIR when
// first needed and unlinked at once, so nothing is left behind however the process ends. If it cannot
// be created or written, the values stay in memory, as without one, and the statistics are the same
// (err says why); if a run cannot be read back, the statistics are wrong (readErr).
type spillFile struct {
	f       *os.File
	size    int64 // bytes written
	err     error // why values stay in memory: creating or writing the file failed
	readErr error // the first error reading a run back

	// limit is the distinct values a distribution settles in memory before they go to the file; fanIn the
	// most runs merged at once (fold), each read through a buffer of readBuf bytes. Tests lower them.
	limit, fanIn, readBuf int
	dir                   string // where the file is created ("": os.TempDir())
	buf                   []byte // the run being written
}

// run is one sorted run in the spill file: entries (key, count) pairs in size bytes from off.
type run struct {
	off, size int64
	entries   int
}

// The spill file's bounds: 8,192 distinct values (128 KiB) in memory per distribution, up to 64 runs merged
// at once through 16 KiB each (1 MiB).
const (
	spillLimit   = 1 << 13
	spillFanIn   = 64
	spillReadBuf = 16 << 10
	spillWrite   = 64 << 10 // bytes a run is written in
)

func newSpillFile() *spillFile {
	return &spillFile{limit: spillLimit, fanIn: spillFanIn, readBuf: spillReadBuf}
}

// open creates the file unless it exists; false when it cannot be (err says why).
func (sp *spillFile) open() bool {
	if sp.err != nil {
		return false
	}
	if sp.f != nil {
		return true
	}
	f, err := os.CreateTemp(sp.dir, "mocker-samples-*")
	if err != nil {
		sp.err = fmt.Errorf("keeping the latency samples in memory: cannot create a temporary file: %w", err)
		return false
	}
	// Unlinked, it lives until closed or the process ends, and leaves nothing behind either way.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		sp.err = fmt.Errorf("keeping the latency samples in memory: cannot unlink temporary file %s: %w", f.Name(), err)
		return false
	}
	sp.f = f
	return true
}

// write writes a sorted run of distinct keys with their counts; ok is false if it could not be (the
// caller keeps them).
func (sp *spillFile) write(keys, counts []uint64) (r run, ok bool) {
	w, ok := sp.writer()
	if !ok {
		return run{}, false
	}
	for i, k := range keys {
		w.add(k, counts[i])
	}
	return w.close()
}

// runWriter appends one run to the spill file.
type runWriter struct {
	sp   *spillFile
	r    run
	prev uint64
	err  error
}

func (sp *spillFile) writer() (*runWriter, bool) {
	if !sp.open() {
		return nil, false
	}
	return &runWriter{sp: sp, r: run{off: sp.size}}, true
}

// add appends key k (at least the previous one) with count c.
func (w *runWriter) add(k, c uint64) {
	w.sp.buf = binary.AppendUvarint(binary.AppendUvarint(w.sp.buf, k-w.prev), c)
	w.prev = k
	w.r.entries++
	if len(w.sp.buf) >= spillWrite {
		w.flush()
	}
}

func (w *runWriter) flush() {
	if buf := w.sp.buf; w.err == nil && len(buf) > 0 {
		_, w.err = w.sp.f.WriteAt(buf, w.r.off+w.r.size)
		w.r.size += int64(len(buf))
	}
	w.sp.buf = w.sp.buf[:0]
}

// close ends the run; ok is false if any of it could not be written, and the file takes no more runs (it
// is still read for those written before).
func (w *runWriter) close() (run, bool) {
	w.flush()
	if w.err != nil {
		w.sp.err = fmt.Errorf("keeping the latency samples in memory: writing the temporary file: %w", w.err)
		return run{}, false
	}
	w.sp.size = w.r.off + w.r.size
	return w.r, true
}

// fold merges the runs into one, the oldest fanIn at a time, with the counts of equal keys added up, so
// that the statistics' two passes read one run in order (a distribution's runs repeat many of their
// values: ITL gaps recur all through a run) rather than merging many twice over; it returns the runs left
// (rs itself if nothing was merged). If the file cannot take a merged run, the runs stay as they are.
func (sp *spillFile) fold(rs []run) []run {
	for len(rs) > 1 {
		w, ok := sp.writer()
		if !ok {
			return rs
		}
		k := min(len(rs), sp.fanIn)
		cs := make([]cursor, k)
		for i, r := range rs[:k] {
			cs[i] = sp.cursor(r)
		}
		var key, count uint64
		merge(cs, func(kk, c uint64) {
			if count > 0 && kk != key {
				w.add(key, count)
				count = 0
			}
			key, count = kk, count+c
		})
		if count > 0 {
			w.add(key, count)
		}
		if sp.readErr != nil {
			return rs
		}
		r, ok := w.close()
		if !ok {
			return rs
		}
		rs = append(slices.Clone(rs[k:]), r)
	}
	return rs
}

// cursor reads run r.
func (sp *spillFile) cursor(r run) cursor {
	return cursor{sp: sp, mem: make([]byte, max(sp.readBuf, 2*binary.MaxVarintLen64)), pos: r.off, end: r.off + r.size,
		left: r.entries}
}

// cursor goes through a sorted sequence of keys with counts: a slice (counts nil: one each) or a run of
// the spill file, read a buffer at a time.
type cursor struct {
	key, count uint64

	keys, counts []uint64
	i            int

	sp       *spillFile
	mem      []byte // the read buffer
	buf      []byte // the run's bytes read and not decoded yet, in mem
	pos, end int64  // the rest of the run in the file
	left     int    // entries of the run not read yet
}

// next moves to the next key; false at the end (or on a read error, recorded in the spill file).
func (c *cursor) next() bool {
	if c.sp == nil {
		if c.i >= len(c.keys) {
			return false
		}
		c.key, c.count = c.keys[c.i], 1
		if c.counts != nil {
			c.count = c.counts[c.i]
		}
		c.i++
		return true
	}
	if c.left == 0 {
		return false
	}
	if len(c.buf) < 2*binary.MaxVarintLen64 && c.pos < c.end { // an entry may straddle the buffer's end
		n := copy(c.mem, c.buf)
		k := int(min(int64(len(c.mem)-n), c.end-c.pos))
		if _, err := c.sp.f.ReadAt(c.mem[n:n+k], c.pos); err != nil {
			return c.fail(err)
		}
		c.buf, c.pos = c.mem[:n+k], c.pos+int64(k)
	}
	d, i := binary.Uvarint(c.buf)
	if i <= 0 {
		return c.fail(errors.New("corrupt run"))
	}
	n, j := binary.Uvarint(c.buf[i:])
	if j <= 0 {
		return c.fail(errors.New("corrupt run"))
	}
	c.buf = c.buf[i+j:]
	c.key += d
	c.count = n
	c.left--
	return true
}

// fail ends the cursor on a read error, the first of which the spill file keeps.
func (c *cursor) fail(err error) bool {
	if c.sp.readErr == nil {
		c.sp.readErr = fmt.Errorf("reading back the latency samples' temporary file: %w", err)
	}
	c.left = 0
	return false
}

// merge visits the keys of the cursors in ascending order (equal keys of different cursors one after the
// other), through a tournament of the cursors by their current key (a loser tree: each node keeps the
// loser of its match, so a key's successor costs one comparison a level, on keys kept side by side).
func merge(cs []cursor, visit func(k, count uint64)) {
	n := len(cs)
	if n == 0 {
		return
	}
	key := make([]uint64, n) // each cursor's key
	live := make([]bool, n)  // false: the cursor is done, and loses every match
	for i := range cs {
		live[i] = cs[i].next()
		key[i] = cs[i].key
	}
	first := func(a, b int) bool { return live[a] && (!live[b] || key[a] < key[b]) }
	// Nodes 1 to n-1 hold the losers of their matches; leaf n+i is cursor i; loser[0] is the winner.
	loser := make([]int, n)
	win := make([]int, 2*n)
	for i := range n {
		win[n+i] = i
	}
	for v := n - 1; v >= 1; v-- {
		a, b := win[2*v], win[2*v+1]
		if first(b, a) {
			a, b = b, a
		}
		win[v], loser[v] = a, b
	}
	w := win[1]
	for live[w] {
		c := &cs[w]
		visit(c.key, c.count)
		live[w] = c.next()
		key[w] = c.key
		for v := (w + n) / 2; v >= 1; v /= 2 {
			if first(loser[v], w) {
				loser[v], w = w, loser[v]
			}
		}
	}
}

// close closes the file, if it was created.
func (sp *spillFile) close() error {
	if sp.f == nil {
		return nil
	}
	err := sp.f.Close()
	sp.f = nil
	return err
}
