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
var models struct {
	sync.Mutex
	m map[string]*modelEntry
}

type modelEntry struct {
	once sync.Once
	mdl  *Model
	err  error
}

// cachedModel is newModel(o), built once per process for each key.
func cachedModel(o Options) (*Model, error) {
	key, ok := cacheKey(o)
	if !ok {
		return newModel(o)
	}
	models.Lock()
	if models.m == nil {
		models.m = map[string]*modelEntry{}
	}
	e := models.m[key]
	if e == nil {
		e = &modelEntry{}
		models.m[key] = e
	}
	models.Unlock()
	e.once.Do(func() { e.mdl, e.err = newModel(o) })
	return e.mdl, e.err
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
