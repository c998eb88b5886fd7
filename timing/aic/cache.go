package aic

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
)

// models caches built Models by everything that determines them (cacheKey): a process that prices
// the same deployment again (a config's checks, its lifetime replay and its run; a sweep over
// settings the tables do not see) builds it once. A Model does not change after New, so one is
// shared; like the table files (readTable), the database is read as it is on first use.
var models onceCache[*Model]

// onceCache holds, for each key, the result of the one build that key gets in this process;
// concurrent callers of the same key wait for that build.
type onceCache[V any] struct {
	sync.Mutex
	m map[string]*onceEntry[V]
}

type onceEntry[V any] struct {
	once sync.Once
	v    V
	err  error
}

// get returns key's value, building it first if no caller has.
func (c *onceCache[V]) get(key string, build func() (V, error)) (V, error) {
	c.Lock()
	if c.m == nil {
		c.m = map[string]*onceEntry[V]{}
	}
	e := c.m[key]
	if e == nil {
		e = &onceEntry[V]{}
		c.m[key] = e
	}
	c.Unlock()
	e.once.Do(func() { e.v, e.err = build() })
	return e.v, e.err
}

// cachedModel is newModel(o), built once per process for each key.
func cachedModel(o Options) (*Model, error) {
	key, ok := cacheKey(o)
	if !ok {
		return newModel(o)
	}
	return models.get(key, func() (*Model, error) { return newModel(o) })
}

// cacheKey is o with the model and system by value and, for a relative root, the working directory
// it is relative to (the root as given, since the Model's sources and errors name its files by it);
// ok is false when o has no such key (a value JSON cannot hold, no working directory), and the Model
// is built every time.
func cacheKey(o Options) (key string, ok bool) {
	k := struct {
		Options
		Dir string
	}{Options: o}
	if o.Root != EmbeddedRoot && o.Root != "" && !filepath.IsAbs(o.Root) {
		wd, err := os.Getwd()
		if err != nil {
			return "", false
		}
		k.Dir = wd
	}
	b, err := json.Marshal(k)
	if err != nil {
		return "", false
	}
	return string(b), true
}
