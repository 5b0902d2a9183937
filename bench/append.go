package main

import (
	"fmt"
	"os"

	"github.com/strata-log/strata/log"
	"github.com/tidwall/wal"
)

// appendBatch is how many records go into one Partition.Append or one
// tidwall/wal WriteBatch.
const appendBatch = 100

// appendVariants: Partition.Append in batches vs tidwall/wal's WriteBatch
// and Write, all to the page cache.
func appendVariants(e *env) []variant {
	var vs []variant
	for _, size := range []int{100, 1024} {
		n := e.pick(2_000_000, 1_000_000, 2_000)
		if size == 1024 {
			n = e.pick(500_000, 200_000, 1_000)
		}
		vs = append(vs, variant{
			label: "append " + sizeName(size), cpuNote: "record",
			limit: limitPageCache,
			systems: []system{
				{name: "strata Partition.Append", baseline: true,
					durability: "page cache (FlushMessages 0: fsync on roll and Close)",
					run:        func(e *env) (sample, error) { return strataAppend(e, size, n) }},
				{name: "tidwall/wal WriteBatch",
					durability: "page cache (NoSync; its default fsyncs every write)",
					run:        func(e *env) (sample, error) { return walAppend(e, size, n, true) }},
				{name: "tidwall/wal Write",
					durability: "page cache (NoSync; its default fsyncs every write)",
					run:        func(e *env) (sample, error) { return walAppend(e, size, n, false) }},
			},
		})
	}
	return vs
}

func sizeName(size int) string {
	if size >= 1024 && size%1024 == 0 {
		return fmt.Sprintf("%d KiB", size/1024)
	}
	return fmt.Sprintf("%d B", size)
}

// strataAppend appends n records of size bytes to one partition on disk,
// appendBatch records per Append.
func strataAppend(e *env, size, n int) (sample, error) {
	dir, err := e.tempDir("strata-append-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		return sample{}, err
	}
	defer b.Close()
	t, err := b.CreateTopic("append", log.TopicConfig{})
	if err != nil {
		return sample{}, err
	}
	p, err := t.Partition(0)
	if err != nil {
		return sample{}, err
	}
	value := payload(size)
	recs := make([]log.Record, appendBatch)
	for i := range recs {
		recs[i].Value = value
	}
	sw := startStopwatch()
	for done := 0; done < n; done += appendBatch {
		if _, err := p.Append(recs[:min(appendBatch, n-done)]...); err != nil {
			return sample{}, err
		}
	}
	smp := sw.sample(int64(n), size)
	if got := p.EndOffset(); got != int64(n) {
		return sample{}, fmt.Errorf("end offset %d after %d records", got, n)
	}
	return smp, b.Close()
}

// walAppend writes n entries of size bytes to a tidwall/wal log, in batches
// of appendBatch with WriteBatch or one by one with Write.
func walAppend(e *env, size, n int, batched bool) (sample, error) {
	dir, err := e.tempDir("wal-append-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	opts := *wal.DefaultOptions
	opts.NoSync = true
	l, err := wal.Open(dir, &opts)
	if err != nil {
		return sample{}, err
	}
	defer l.Close()
	value := payload(size)
	var wb wal.Batch
	sw := startStopwatch()
	idx := uint64(1)
	for done := 0; done < n; {
		if !batched {
			if err := l.Write(idx, value); err != nil {
				return sample{}, err
			}
			idx++
			done++
			continue
		}
		k := min(appendBatch, n-done)
		for range k {
			wb.Write(idx, value)
			idx++
		}
		if err := l.WriteBatch(&wb); err != nil {
			return sample{}, err
		}
		wb.Clear()
		done += k
	}
	smp := sw.sample(int64(n), size)
	last, err := l.LastIndex()
	if err != nil {
		return sample{}, err
	}
	if last != uint64(n) {
		return sample{}, fmt.Errorf("last index %d after %d entries", last, n)
	}
	return smp, l.Close()
}
