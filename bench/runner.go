package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// mode is how big the runs are.
type mode int

const (
	modeFull  mode = iota // go run .
	modeQuick             // go run . -quick
	modeTiny              // the smoke tests
)

// env is what every measurement gets.
type env struct {
	mode    mode
	runs    int
	root    string   // parent of every temporary directory; removed at the end
	systems []string // name prefixes to run; empty: all
	// liveHeapMiB is the size of the application heap kept live in the
	// cases that ask for one (heap.go).
	liveHeapMiB int
	log         io.Writer
}

// pick returns the size for the mode.
func (e *env) pick(full, quick, tiny int) int {
	switch e.mode {
	case modeQuick:
		return quick
	case modeTiny:
		return tiny
	}
	return full
}

// pickDur returns the duration for the mode.
func (e *env) pickDur(full, quick, tiny time.Duration) time.Duration {
	return time.Duration(e.pick(int(full), int(quick), int(tiny)))
}

// tempDir makes a fresh directory under root; the caller removes it.
func (e *env) tempDir(pattern string) (string, error) {
	return os.MkdirTemp(e.root, pattern)
}

func (e *env) wants(system string) bool {
	if len(e.systems) == 0 {
		return true
	}
	for _, s := range e.systems {
		if strings.HasPrefix(system, s) {
			return true
		}
	}
	return false
}

func (e *env) logf(format string, args ...any) {
	if e.log != nil {
		fmt.Fprintf(e.log, format+"\n", args...)
	}
}

// sample is one run of one system.
type sample struct {
	Records int64         `json:"records"`    // records (or timers, starts) done
	Bytes   int64         `json:"bytes"`      // payload bytes moved: records × value size
	Elapsed time.Duration `json:"elapsed_ns"` // wall time of the measured part
	CPU     time.Duration `json:"cpu_ns"`     // CPU time of the measured part, where measured (0: not)
	// P50 and P99 are the median and 99th percentile of the run's
	// individual operations (a round trip, a fixture's whole use), in
	// the cases that time each one (0: not timed one by one).
	P50 time.Duration `json:"p50_ns,omitempty"`
	P99 time.Duration `json:"p99_ns,omitempty"`
	// AckP50 and AckP99 are those of the first part of each round trip
	// where the case has one (latency: the produce until acknowledged;
	// the rest is the consume): kept in the JSON, not in the table.
	AckP50 time.Duration `json:"ack_p50_ns,omitempty"`
	AckP99 time.Duration `json:"ack_p99_ns,omitempty"`
}

// percentiles returns the median and the 99th percentile of ds (sorted
// in place).
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[min(len(ds)*99/100, len(ds)-1)]
}

// system is one contender in a variant.
type system struct {
	name       string
	durability string
	baseline   bool // Strata's row: the others are compared with it
	limit      bool // a case's limit (limits_kafka.go): runs whatever -system says
	run        func(e *env) (sample, error)
}

// variant is one line-up of systems doing the same work, e.g. "append 100 B".
type variant struct {
	label   string
	limit   string // key of the limit its MB/s is compared with; "" for none
	unit    string // what records/s counts, when not records
	cpuNote string // what CPU means here, when measured
	byCPU   bool   // records/s counts per CPU-second, not per second of wall time
	// liveHeap: an application's live heap (heap.go) is kept in the
	// process while the systems run, as in a test or an embedding program
	// that has a Kafka client and a server in one process; the label says
	// so.
	liveHeap bool
	systems  []system
	// setup, if set, prepares what the systems share before the first
	// run; teardown undoes it after the last.
	setup    func(e *env) error
	teardown func()
}

// benchCase is one of the cases.
type benchCase struct {
	name     string
	variants func(e *env) []variant
}

func allCases() []benchCase {
	return []benchCase{
		{"append", appendVariants},
		{"produce", produceVariants},
		{"compressed", compressedVariants},
		{"durable", durableVariants},
		{"timers", timerVariants},
		{"zerocopy", zeroCopyVariants},
		{"fixture", fixtureVariants},
		{"replay", replayVariants},
		{"server", serverVariants},
		{"latency", latencyVariants},
		{"roundtrip", roundTripVariants},
		{"share", shareVariants},
		{"txn", txnVariants},
	}
}

// measure measures the limits, calls casesStart (which may start a CPU
// profile), and then measures each case's variants. Within a variant the
// systems take turns, run by run, and the order rotates, so that a noisy
// minute on the shared machine hits each of them alike.
func measure(e *env, cases []benchCase, casesStart func() error) (*report, error) {
	rep := newReport(e)
	var err error
	if rep.Limits, err = measureLimits(e); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	if casesStart != nil {
		if err := casesStart(); err != nil {
			return nil, err
		}
	}
	for _, c := range cases {
		for _, v := range c.variants(e) {
			if err := rep.measureVariantAndLimit(e, c.name, v); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}

func measureVariant(e *env, caseName string, v variant) []row {
	var systems []system
	for _, s := range v.systems {
		if e.wants(s.name) || s.limit {
			systems = append(systems, s)
		}
	}
	label := v.label
	if size := liveHeapBytes(e); v.liveHeap && size > 0 {
		label += fmt.Sprintf(", %d MiB live heap", size>>20)
		appHeap = newLiveHeap(size)
		defer func() { appHeap = nil }()
	}
	rows := make([]row, len(systems))
	for i, s := range systems {
		rows[i] = row{Case: caseName, Variant: label, System: s.name, Durability: s.durability,
			Unit: v.unit, CPUNote: v.cpuNote, ByCPU: v.byCPU, Limit: v.limit, baseline: s.baseline}
	}
	if v.setup != nil {
		if err := v.setup(e); err != nil {
			for i := range rows {
				rows[i].Error = "setup: " + err.Error()
			}
		}
	}
	if v.teardown != nil {
		defer v.teardown()
	}
	for r := range e.runs {
		for k := range systems {
			i := (k + r) % len(systems)
			if rows[i].Error != "" {
				continue
			}
			e.logf("bench: %s / %s: run %d of %d", v.label, systems[i].name, r+1, e.runs)
			smp, err := systems[i].run(e)
			if err != nil {
				rows[i].Error = err.Error()
				e.logf("bench: %s / %s: %v", v.label, systems[i].name, err)
				continue
			}
			rows[i].Samples = append(rows[i].Samples, smp)
		}
	}
	for i := range rows {
		rows[i].summarize()
	}
	return rows
}

// stat is the median and spread of one figure over the runs.
type stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func statOf(xs []float64) stat {
	if len(xs) == 0 {
		return stat{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stat{Median: m, Min: s[0], Max: s[len(s)-1]}
}
