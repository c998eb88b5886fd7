// Package sweep runs a recommend search's jobs on other processes, through a NATS JetStream work queue:
// a Coordinator is the search's Options.Runner, publishing each job and waiting for its result; Serve is
// a worker (`mocker sweep-worker`) that takes jobs one at a time, runs recommend.Evaluate and publishes
// the candidate.
//
// Delivery is at least once: a worker acknowledges a job only once its result is stored, and tells the
// server it is still working every third of the ack wait; a worker that dies holding a job never
// acknowledges it, so the server hands it to another worker when the ack wait runs out. A result that
// arrives twice is taken once. Jobs are deterministic, so wherever a job runs its candidate is the same,
// and the search, which orders its jobs itself, gives the same report as a local run.
//
// A job carries the whole configuration, with file paths made absolute: a worker on another machine
// needs the trace (or model config, perf database) at the same path, and refuses a trace whose SHA-256
// differs from the coordinator's.
package sweep

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/recommend"
)

// The streams, subjects and consumer the coordinators and workers share.
const (
	JobStream     = "MOCKER_SWEEP"
	JobPrefix     = "mocker.sweep.jobs." // + the coordinator's run id
	ResultStream  = "MOCKER_SWEEP_RESULTS"
	ResultPrefix  = "mocker.sweep.results." // + the coordinator's run id
	WorkerGroup   = "sweep-workers"         // the work queue's durable consumer
	resultsMaxAge = time.Hour
	// apiTimeout bounds each JetStream API call without a deadline of its own (creating the streams,
	// publishing a job or a result): nats.go's 5 s default fails a sweep whose server or host is busy,
	// as the race detector's runs on a loaded machine showed.
	apiTimeout = 30 * time.Second
)

// message is a job on the work queue.
type message struct {
	Run         string            `json:"run"` // the coordinator's run: the subject of its results
	ID          uint64            `json:"id"`
	Config      string            `json:"config"` // config.Config as YAML
	Given       map[string]string `json:"given"`  // config.Config.GivenKeys
	Targets     []string          `json:"targets"`
	TraceSHA256 string            `json:"trace_sha256,omitempty"`
	Job         recommend.Job     `json:"job"`
}

// result is a job's answer.
type result struct {
	ID        uint64              `json:"id"`
	Candidate recommend.Candidate `json:"candidate"`
	Fatal     string              `json:"fatal,omitempty"` // the worker could not run the job at all
}

// Coordinator publishes a search's jobs and collects their results.
type Coordinator struct {
	ctx     context.Context
	js      jetstream.JetStream
	tmpl    message
	results jetstream.ConsumeContext
	next    atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]chan result
}

// NewCoordinator creates the streams and the workers' consumer if need be (a job not acknowledged
// within ackWait goes to another worker) and subscribes to this run's results.
func NewCoordinator(ctx context.Context, nc *nats.Conn, base *config.Config, targets []recommend.Target, ackWait time.Duration) (*Coordinator, error) {
	if ackWait < time.Second {
		return nil, fmt.Errorf("ack wait %v: at least 1s", ackWait)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(apiTimeout))
	if err != nil {
		return nil, err
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: JobStream, Subjects: []string{JobPrefix + ">"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.MemoryStorage}); err != nil {
		return nil, fmt.Errorf("stream %s: %w", JobStream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: ResultStream, Subjects: []string{ResultPrefix + ">"},
		Storage: jetstream.MemoryStorage, MaxAge: resultsMaxAge}); err != nil {
		return nil, fmt.Errorf("stream %s: %w", ResultStream, err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, JobStream, jetstream.ConsumerConfig{Durable: WorkerGroup,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait}); err != nil {
		return nil, fmt.Errorf("consumer %s: %w", WorkerGroup, err)
	}
	c := &Coordinator{ctx: ctx, js: js, pending: map[uint64]chan result{}}
	if c.tmpl, err = template(base, targets); err != nil {
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, ResultStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{ResultPrefix + c.tmpl.Run}})
	if err != nil {
		return nil, err
	}
	c.results, err = cons.Consume(func(m jetstream.Msg) {
		var r result
		if err := json.Unmarshal(m.Data(), &r); err != nil {
			return // not ours to judge: a job's result that does not parse is waited for again
		}
		c.mu.Lock()
		ch := c.pending[r.ID]
		delete(c.pending, r.ID) // a second delivery of the same result finds nothing
		c.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	})
	return c, err
}

// template is every job's message but the job: the configuration with absolute paths, the targets,
// the trace's digest and a fresh run id.
func template(base *config.Config, targets []recommend.Target) (message, error) {
	cfg := *base
	paths := []*string{&cfg.Trace, &cfg.ModelConfig, &cfg.PerfDB, &cfg.Profile}
	for _, r := range config.Roles {
		if p := cfg.Role(r).Profile; p != nil {
			own := *p // the copy shares base's
			cfg.Role(r).Profile = &own
			paths = append(paths, &own)
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(*p); *p != "" && err == nil {
			if abs, err := filepath.Abs(*p); err == nil {
				*p = abs
			}
		}
	}
	y, err := yaml.Marshal(&cfg)
	if err != nil {
		return message{}, err
	}
	m := message{Run: nats.NewInbox()[len(nats.InboxPrefix):], Config: string(y), Given: base.GivenKeys()}
	for _, t := range targets {
		m.Targets = append(m.Targets, t.String())
	}
	if cfg.Trace != "" {
		if m.TraceSHA256, err = digest(cfg.Trace); err != nil {
			return message{}, err
		}
	}
	return m, nil
}

// Run publishes a job and waits for its result: recommend.Options.Runner.
func (c *Coordinator) Run(j recommend.Job) (recommend.Candidate, error) {
	m := c.tmpl
	m.ID, m.Job = c.next.Add(1), j
	data, err := json.Marshal(&m)
	if err != nil {
		return recommend.Candidate{}, err
	}
	ch := make(chan result, 1)
	c.mu.Lock()
	c.pending[m.ID] = ch
	c.mu.Unlock()
	if _, err := c.js.Publish(c.ctx, JobPrefix+c.tmpl.Run, data); err != nil {
		return recommend.Candidate{}, fmt.Errorf("publishing a job: %w", err)
	}
	select {
	case r := <-ch:
		if r.Fatal != "" {
			return recommend.Candidate{}, fmt.Errorf("sweep worker: %s", r.Fatal)
		}
		return r.Candidate, nil
	case <-c.ctx.Done():
		return recommend.Candidate{}, c.ctx.Err()
	}
}

// Close stops collecting results and takes this run's jobs still waiting off the queue (a search that
// failed or was interrupted leaves the workers nothing of its own to do).
func (c *Coordinator) Close() {
	c.results.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := c.js.Stream(ctx, JobStream); err == nil {
		st.Purge(ctx, jetstream.WithPurgeSubject(JobPrefix+c.tmpl.Run))
	}
}

// Serve takes jobs from the work queue, parallel at a time, until ctx is done, each run on an equal
// share of the cores (sim.Options.Threads). It waits for a coordinator to create the queue. log gets a
// line as each job starts and ends.
func Serve(ctx context.Context, nc *nats.Conn, parallel int, log io.Writer) error {
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(apiTimeout))
	if err != nil {
		return err
	}
	var cons jetstream.Consumer
	for {
		if cons, err = js.Consumer(ctx, JobStream, WorkerGroup); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond): // no coordinator yet
		}
	}
	ackWait := cons.CachedInfo().Config.AckWait
	w := &worker{js: js, log: log, digests: map[string]string{}, threads: max(runtime.GOMAXPROCS(0)/max(parallel, 1), 1)}
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Go(func() {
			for ctx.Err() == nil {
				batch, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
				if err != nil {
					select {
					case <-ctx.Done():
					case <-time.After(500 * time.Millisecond):
					}
					continue
				}
				for m := range batch.Messages() {
					w.handle(ctx, m, ackWait)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

type worker struct {
	js      jetstream.JetStream
	log     io.Writer
	mu      sync.Mutex
	digests map[string]string // run and trace path → SHA-256, read once
	threads int               // each run's sim.Options.Threads
}

// handle runs one job, publishes its result and acknowledges it; the job's ack deadline is pushed back
// while it runs.
func (w *worker) handle(ctx context.Context, m jetstream.Msg, ackWait time.Duration) {
	var msg message
	if err := json.Unmarshal(m.Data(), &msg); err != nil {
		m.Term() // no worker can read it
		return
	}
	w.mu.Lock()
	fmt.Fprintf(w.log, "start %s %d\n", msg.Run, msg.ID)
	w.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				m.InProgress()
			}
		}
	}()
	r := w.run(&msg)
	close(done)
	data, err := json.Marshal(&r)
	if err == nil {
		_, err = w.js.Publish(ctx, ResultPrefix+msg.Run, data)
	}
	if err != nil {
		m.Nak() // another worker, or this one, tries again
		return
	}
	m.Ack()
	w.mu.Lock()
	fmt.Fprintf(w.log, "done %s %d\n", msg.Run, msg.ID)
	w.mu.Unlock()
}

// run rebuilds the coordinator's configuration and evaluates the job.
func (w *worker) run(msg *message) result {
	r := result{ID: msg.ID}
	fatal := func(err error) result { r.Fatal = err.Error(); return r }
	var cfg config.Config
	if err := yaml.Unmarshal([]byte(msg.Config), &cfg); err != nil {
		return fatal(fmt.Errorf("configuration: %w", err))
	}
	for k, v := range msg.Given {
		cfg.Given(k, v)
	}
	var targets []recommend.Target
	for _, s := range msg.Targets {
		t, err := recommend.ParseTarget(s)
		if err != nil {
			return fatal(err)
		}
		targets = append(targets, t)
	}
	if cfg.Trace != "" {
		key := msg.Run + "\x00" + cfg.Trace // read again for another run: the file may have changed
		w.mu.Lock()
		d, ok := w.digests[key]
		w.mu.Unlock()
		if !ok {
			var err error
			if d, err = digest(cfg.Trace); err != nil {
				return fatal(err)
			}
			w.mu.Lock()
			w.digests[key] = d
			w.mu.Unlock()
		}
		if d != msg.TraceSHA256 {
			return fatal(fmt.Errorf("trace %s: SHA-256 %s here, %s at the coordinator", cfg.Trace, d, msg.TraceSHA256))
		}
	}
	r.Candidate = recommend.Evaluate(&cfg, targets, msg.Job, w.threads)
	return r
}

// digest is a file's SHA-256 in hex.
func digest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
