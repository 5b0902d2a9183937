package index_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-log/strata/index"
	"github.com/strata-log/strata/vfs"
)

// An offset index as a segment uses it: an entry every few KiB of batches,
// lookups for the batch to start a read from, a trim when the segment rolls.
func ExampleOpenOffsetIndex() {
	dir, err := os.MkdirTemp("", "index-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	name := filepath.Join(dir, "00000000000000000100.index")
	x, err := index.OpenOffsetIndex(vfs.Default, name, 100, 10<<20)
	if err != nil {
		panic(err)
	}
	// The batches holding offsets 100, 140 and 190 start at these bytes.
	for _, e := range []index.OffsetEntry{{Offset: 100, Position: 0}, {Offset: 140, Position: 4200}, {Offset: 190, Position: 8400}} {
		if err := x.Append(e.Offset, e.Position); err != nil {
			panic(err)
		}
	}
	fmt.Println("read 150 from", x.Lookup(150))
	fmt.Println("read 190 from", x.Lookup(190))
	fmt.Println(errors.Is(x.Append(170, 9000), index.ErrInvalidEntry))

	// Roll: the file shrinks to its entries and the index is full.
	if err := x.TrimToValidSize(); err != nil {
		panic(err)
	}
	st, _ := os.Stat(name)
	fmt.Println(x.Entries(), "entries,", st.Size(), "bytes, full:", x.IsFull())
	if err := x.Close(); err != nil {
		panic(err)
	}
	// Output:
	// read 150 from {140 4200}
	// read 190 from {190 8400}
	// true
	// 3 entries, 24 bytes, full: true
}

// A time index answers "where do records at or after this time start?".
func ExampleOpenTimeIndex() {
	dir, err := os.MkdirTemp("", "index-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	x, err := index.OpenTimeIndex(vfs.Default, filepath.Join(dir, "00000000000000000100.timeindex"), 100, 10<<20)
	if err != nil {
		panic(err)
	}
	defer x.Close()
	// The largest timestamp so far, and the offset where it was reached.
	// Only a new largest timestamp adds an entry.
	_ = x.MaybeAppend(1_700_000_000_000, 100, false)
	_ = x.MaybeAppend(1_700_000_000_500, 150, false)
	_ = x.MaybeAppend(1_700_000_000_200, 160, false) // not a new largest: ignored
	_ = x.MaybeAppend(1_700_000_009_000, 230, false)
	fmt.Println(x.Entries())
	fmt.Println(x.Lookup(1_700_000_005_000))
	fmt.Println(x.Lookup(1_600_000_000_000))
	// Output:
	// 3
	// {1700000000500 150}
	// {-1 100}
}

// After a crash an index is not trusted: the segment checks it against the
// .log and rebuilds it when the check fails.
func ExampleOffsetIndex_SanityCheck() {
	dir, err := os.MkdirTemp("", "index-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// A preallocated index left by a crash: two entries, then zeros.
	name := filepath.Join(dir, "00000000000000000000.index")
	data := make([]byte, 64)
	copy(data, []byte{0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0x10, 0})
	if err := os.WriteFile(name, data, 0o644); err != nil {
		panic(err)
	}
	x, err := index.OpenOffsetIndex(vfs.Default, name, 0, 64)
	if err != nil {
		panic(err)
	}
	defer x.Close()
	const logSize = 8000
	if err := x.SanityCheck(logSize); errors.Is(err, index.ErrCorruptIndex) {
		fmt.Println("rebuilding:", filepath.Base(err.Error()))
		if err := x.Reset(); err != nil {
			panic(err)
		}
		// ...an entry every IndexIntervalBytes while scanning the .log:
		_ = x.Append(5, 0)
		_ = x.Append(9, 4096)
	}
	fmt.Println(x.Entries(), x.SanityCheck(logSize))
	// Output:
	// rebuilding: 00000000000000000000.index: entry 2: offset 0 not above the previous offset 9
	// 2 <nil>
}
