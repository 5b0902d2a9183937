package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/vfs"
)

// Sizes of the entries of the two index files (package index's layout).
const (
	offsetEntryBytes = 8
	timeEntryBytes   = 12
)

// maxIndexFileBytes bounds the index files dump and verify read into
// memory: Kafka's segment.index.bytes is an int32.
const maxIndexFileBytes = 1<<31 - 1

// segmentBase returns the base offset a segment file's name gives
// (00000000000000000042.log → 42).
func segmentBase(path string) (int64, error) {
	name := filepath.Base(path)
	stem := strings.TrimSuffix(name, filepath.Ext(name))
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return 0, fmt.Errorf("%s: not a segment file name (want a base offset, such as 00000000000000000000%s)", name, filepath.Ext(name))
	}
	return base, nil
}

// indexFile is the decoded contents of a .index or .timeindex file.
type indexFile struct {
	size     int64 // file size
	partial  int   // bytes at the end that are not a whole entry
	offsets  []index.OffsetEntry
	times    []index.TimeEntry
	zeroTail int // entries at the end that are all zero: preallocated, never written
}

// entries is the number of entries before the zero tail.
func (x *indexFile) entries() int {
	return max(len(x.offsets), len(x.times)) - x.zeroTail
}

// readIndexFile decodes an index file with package index. The index package
// opens files read-write (and trims them on close), so the bytes are copied
// into an in-memory file system first: dump and verify never change a file.
func readIndexFile(path string, base int64, timeIndex bool) (*indexFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxIndexFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than an index can be (Kafka's segment.index.bytes is at most %d)", path, st.Size(), int64(maxIndexFileBytes))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	entrySize := offsetEntryBytes
	if timeIndex {
		entrySize = timeEntryBytes
	}
	x := &indexFile{size: int64(len(data)), partial: len(data) % entrySize}
	if len(data) < entrySize {
		return x, nil
	}
	mem := vfs.NewMem()
	const name = "/index"
	f, err := mem.Create(name)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if timeIndex {
		ti, err := index.OpenTimeIndex(mem, name, base, len(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer ti.Close()
		x.times = make([]index.TimeEntry, ti.Entries())
		for i := range x.times {
			x.times[i], _ = ti.Entry(i)
		}
		for i := len(x.times) - 1; i >= 0 && x.times[i] == (index.TimeEntry{Timestamp: 0, Offset: base}); i-- {
			x.zeroTail++
		}
	} else {
		oi, err := index.OpenOffsetIndex(mem, name, base, len(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer oi.Close()
		x.offsets = make([]index.OffsetEntry, oi.Entries())
		for i := range x.offsets {
			x.offsets[i], _ = oi.Entry(i)
		}
		for i := len(x.offsets) - 1; i >= 0 && x.offsets[i] == (index.OffsetEntry{Offset: base, Position: 0}); i-- {
			x.zeroTail++
		}
	}
	// A lone all-zero first entry may be a real one; only a run of them is
	// the unwritten tail of a preallocated file.
	if x.zeroTail == 1 && max(len(x.offsets), len(x.times)) == 1 {
		x.zeroTail = 0
	}
	return x, nil
}

// txnIndexFile is the decoded contents of a .txnindex file.
type txnIndexFile struct {
	size    int64
	entries []index.AbortedTxn // the whole entries
	// bad is what index.TxnIndex.SanityCheck finds wrong (a torn tail, a
	// version other than 0, last offsets out of order), nil if nothing.
	bad error
}

// readTxnIndexFile decodes a transaction index with package index, from a
// copy in memory as readIndexFile does.
func readTxnIndexFile(path string, base int64) (*txnIndexFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxIndexFileBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than this tool reads of a transaction index", path, st.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	mem := vfs.NewMem()
	const name = "/txnindex"
	f, err := mem.Create(name)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	x, err := index.OpenTxnIndex(mem, name, base)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer x.Close()
	entries, err := x.All()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &txnIndexFile{size: int64(len(data)), entries: entries, bad: x.SanityCheck()}, nil
}
