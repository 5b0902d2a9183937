package main

import (
	"fmt"

	"github.com/strata-log/strata/log"
	"github.com/tidwall/wal"
)

// replayVariants: a log of 100 B records written, closed, reopened and
// read from the start to the end, as a program rebuilding its state at
// start-up does — each run in a bare process (bare.go). Strata's
// Partition.Records, Partition.Read (the allocating API, 1 MiB per call)
// and Partition.ReadAppend (1 MiB per call into one reused []Record)
// against tidwall/wal's Read of each index in turn.
func replayVariants(e *env) []variant {
	const size = 100
	n := e.pick(2_000_000, 1_000_000, 2_000)
	return []variant{{
		label: "replay " + sizeName(size) + " (bare process)", cpuNote: "record",
		limit: limitMemcpy,
		systems: []system{
			{name: "strata Partition.Records", baseline: true,
				durability: "– (reads page-cached segments)",
				run:        func(e *env) (sample, error) { return bareRun(e, "replay-strata", size, n) }},
			{name: "strata Partition.Read (1 MiB per call)",
				durability: "– (reads page-cached segments)",
				run:        func(e *env) (sample, error) { return bareRun(e, "replay-strata-read", size, n) }},
			{name: "strata Partition.ReadAppend (1 MiB per call, []Record reused)",
				durability: "– (reads page-cached segments)",
				run:        func(e *env) (sample, error) { return bareRun(e, "replay-strata-readappend", size, n) }},
			{name: "tidwall/wal Read", durability: "– (reads page-cached segments)",
				run: func(e *env) (sample, error) { return bareRun(e, "replay-wal", size, n) }},
		},
	}}
}

// strataReplay writes a.N records of a.Size bytes to one partition
// (appendBatch per Append), closes and reopens the broker, and times a
// replay with Records.
func strataReplay(a childArgs) (sample, error) {
	return strataReplayWith(a, func(p *log.Partition) (n, bytes int, err error) {
		for r, err := range p.Records(0) {
			if err != nil {
				return n, bytes, err
			}
			n++
			bytes += len(r.Value)
		}
		return n, bytes, nil
	})
}

// readMaxBytes is what the Read replay asks for per call: a fetch's
// default per-partition maximum.
const readMaxBytes = 1 << 20

// strataReadReplay is strataReplay reading with Partition.Read, which
// allocates the records it returns, readMaxBytes per call.
func strataReadReplay(a childArgs) (sample, error) {
	return strataReplayWith(a, func(p *log.Partition) (n, bytes int, err error) {
		for off, end := int64(0), p.EndOffset(); off < end; {
			recs, err := p.Read(off, readMaxBytes)
			if err != nil {
				return n, bytes, err
			}
			if len(recs) == 0 {
				return n, bytes, fmt.Errorf("strata: Read(%d) returned nothing before the end offset %d", off, end)
			}
			for _, r := range recs {
				bytes += len(r.Value)
			}
			n += len(recs)
			off = recs[len(recs)-1].Offset + 1
		}
		return n, bytes, nil
	})
}

// strataReadAppendReplay is strataReadReplay reading with
// Partition.ReadAppend into one []Record reused from call to call, as a
// reader going through a partition does: the records' bytes are still
// read into a new buffer per call (the records alias it), their []Record
// is not allocated again.
func strataReadAppendReplay(a childArgs) (sample, error) {
	return strataReplayWith(a, func(p *log.Partition) (n, bytes int, err error) {
		var recs []log.Record
		for off, end := int64(0), p.EndOffset(); off < end; {
			recs, err = p.ReadAppend(recs[:0], off, readMaxBytes)
			if err != nil {
				return n, bytes, err
			}
			if len(recs) == 0 {
				return n, bytes, fmt.Errorf("strata: ReadAppend(%d) returned nothing before the end offset %d", off, end)
			}
			for _, r := range recs {
				bytes += len(r.Value)
			}
			n += len(recs)
			off = recs[len(recs)-1].Offset + 1
		}
		return n, bytes, nil
	})
}

// strataReplayWith writes the log as strataReplay does and times replay.
func strataReplayWith(a childArgs, replay func(p *log.Partition) (n, bytes int, err error)) (sample, error) {
	b, err := log.Open(a.Dir, log.Config{})
	if err != nil {
		return sample{}, err
	}
	t, err := b.CreateTopic("replay", log.TopicConfig{})
	if err != nil {
		b.Close()
		return sample{}, err
	}
	p, err := t.Partition(0)
	if err != nil {
		b.Close()
		return sample{}, err
	}
	value := payload(a.Size)
	recs := make([]log.Record, appendBatch)
	for i := range recs {
		recs[i].Value = value
	}
	for done := 0; done < a.N; done += appendBatch {
		if _, err := p.Append(recs[:min(appendBatch, a.N-done)]...); err != nil {
			b.Close()
			return sample{}, err
		}
	}
	if err := b.Close(); err != nil {
		return sample{}, err
	}
	recs = nil

	if b, err = log.Open(a.Dir, log.Config{}); err != nil {
		return sample{}, err
	}
	defer b.Close()
	if p, err = b.Partition("replay", 0); err != nil {
		return sample{}, err
	}
	settle()
	sw := startStopwatch()
	n, bytes, err := replay(p)
	if err != nil {
		return sample{}, err
	}
	smp := sw.sample(int64(n), a.Size)
	if n != a.N || bytes != a.N*a.Size {
		return sample{}, fmt.Errorf("strata: replayed %d records of %d bytes, want %d of %d", n, bytes, a.N, a.N*a.Size)
	}
	return smp, b.Close()
}

// walReplay writes a.N entries of a.Size bytes with WriteBatch (appendBatch
// per batch, NoSync), closes and reopens the log, and times reading every
// index from the first to the last with Read.
func walReplay(a childArgs) (sample, error) {
	opts := *wal.DefaultOptions
	opts.NoSync = true
	l, err := wal.Open(a.Dir, &opts)
	if err != nil {
		return sample{}, err
	}
	value := payload(a.Size)
	var wb wal.Batch
	for idx := 1; idx <= a.N; {
		for k := 0; k < appendBatch && idx <= a.N; k++ {
			wb.Write(uint64(idx), value)
			idx++
		}
		if err := l.WriteBatch(&wb); err != nil {
			l.Close()
			return sample{}, err
		}
		wb.Clear()
	}
	if err := l.Close(); err != nil {
		return sample{}, err
	}

	if l, err = wal.Open(a.Dir, &opts); err != nil {
		return sample{}, err
	}
	defer l.Close()
	settle()
	sw := startStopwatch()
	first, err := l.FirstIndex()
	if err != nil {
		return sample{}, err
	}
	last, err := l.LastIndex()
	if err != nil {
		return sample{}, err
	}
	n, bytes := 0, 0
	for idx := first; idx <= last && first > 0; idx++ {
		data, err := l.Read(idx)
		if err != nil {
			return sample{}, err
		}
		n++
		bytes += len(data)
	}
	smp := sw.sample(int64(n), a.Size)
	if n != a.N || bytes != a.N*a.Size {
		return sample{}, fmt.Errorf("wal: read %d entries of %d bytes, want %d of %d", n, bytes, a.N, a.N*a.Size)
	}
	return smp, l.Close()
}
