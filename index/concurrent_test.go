package index

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/strata-log/strata/internal/leaktest"
)

// The entries the concurrent writers append: entry i is at offset
// base+2i+1, position 10i (offset index) and timestamp 1000+3i (time index).
// A reader can tell from any entry whether it is whole.

const concBase = 1000

func concOffsetEntry(i int64) OffsetEntry {
	return OffsetEntry{Offset: concBase + 2*i + 1, Position: 10 * i}
}

func concTimeEntry(i int64) TimeEntry {
	return TimeEntry{Timestamp: 1000 + 3*i, Offset: concBase + 2*i + 1}
}

// runReaders starts n readers calling read(rng) in a loop; the returned stop
// ends them, waits for them and returns the first error any reported.
func runReaders(n int, read func(rng *rand.Rand) error) (stop func() error) {
	done := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := read(rng); err != nil {
					errs <- err
					return
				}
				runtime.Gosched() // let the writer run on a busy machine

			}
		})
	}
	return func() error {
		close(done)
		wg.Wait()
		close(errs)
		return <-errs
	}
}

// runFlusher starts a goroutine that calls flush each time the writer pokes
// it (a fsync per append would make the test slow, not sharper); stop ends it
// and returns the first error.
func runFlusher(flush func() error) (poke func(), stop func() error) {
	pokes := make(chan struct{}, 1)
	done := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		var first error
		defer func() { result <- first }()
		for {
			select {
			case <-done:
				return
			case <-pokes:
				if err := flush(); err != nil && first == nil {
					first = err
				}
			}
		}
	}()
	poke = func() {
		select {
		case pokes <- struct{}{}:
		default:
		}
	}
	return poke, func() error {
		close(done)
		return <-result
	}
}

// TestOffsetIndexConcurrent runs one writer (appends, and with churn also
// truncations, resets, resizes and trims) against readers doing Lookup,
// LastEntry and Entry, and a flusher. Readers check that every entry they see
// is whole and no later than their target; without churn, also that a lookup
// finds at least the entries published before it started.
func TestOffsetIndexConcurrent(t *testing.T) {
	for _, churn := range []bool{false, true} {
		forEachBackend(t, func(t *testing.T, b backend, dir string) {
			t.Run(fmt.Sprintf("churn=%v", churn), func(t *testing.T) {
				leaktest.Check(t)
				const n = 10000
				x := mustOpenOffset(t, b, filepath.Join(dir, fmt.Sprint(churn)+".index"), concBase, 64*8)
				check := func(e OffsetEntry) error {
					if e == (OffsetEntry{Offset: concBase}) {
						return nil
					}
					if i := (e.Offset - concBase - 1) / 2; e != concOffsetEntry(i) {
						return fmt.Errorf("torn or foreign entry %+v", e)
					}
					return nil
				}
				stop := runReaders(2, func(rng *rand.Rand) error {
					published := x.Entries()
					target := concBase + rng.Int64N(2*n+10)
					e := x.Lookup(target)
					if err := check(e); err != nil {
						return err
					}
					if e.Offset > target {
						return fmt.Errorf("Lookup(%d) = %+v, past the target", target, e)
					}
					if !churn && published > 0 {
						// Entries only grow: the answer is at least
						// what the published entries give.
						floor := OffsetEntry{Offset: concBase}
						if target > concBase {
							floor = concOffsetEntry(min((target-concBase-1)/2, int64(published)-1))
						}
						if e.Offset < floor.Offset {
							return fmt.Errorf("Lookup(%d) = %+v with %d entries published, want >= %+v", target, e, published, floor)
						}
					}
					if err := check(x.LastEntry()); err != nil {
						return err
					}
					if e, ok := x.Entry(rng.IntN(published + 1)); ok {
						return check(e)
					}
					return nil
				})
				poke, stopFlusher := runFlusher(x.Flush)

				rng := rand.New(rand.NewPCG(1, 2))
				for i := int64(0); i < n; {
					err := x.Append(concOffsetEntry(i).Offset, concOffsetEntry(i).Position)
					switch {
					case errors.Is(err, ErrIndexFull):
						if err := x.Resize((x.Entries() + 64) * 8); err != nil {
							t.Fatal(err)
						}
						continue
					case err != nil:
						t.Fatal(err)
					}
					i++
					if i%256 == 0 {
						poke()
					}
					if !churn {
						continue
					}
					switch rng.IntN(200) {
					case 0: // drop a few entries and append them again
						i = max(0, i-int64(rng.IntN(50)))
						if err := x.TruncateTo(concOffsetEntry(i).Offset); err != nil {
							t.Fatal(err)
						}
					case 1:
						if err := x.TrimToValidSize(); err != nil {
							t.Fatal(err)
						}
					case 2:
						if rng.IntN(20) == 0 {
							if err := x.Reset(); err != nil {
								t.Fatal(err)
							}
							i = 0
						}
					}
				}
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if err := stopFlusher(); err != nil {
					t.Fatal(err)
				}
				if x.LastEntry() != concOffsetEntry(n-1) {
					t.Fatalf("LastEntry = %+v", x.LastEntry())
				}
				if err := x.SanityCheck(10*n + 1); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

func TestTimeIndexConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, dir string) {
		leaktest.Check(t)
		const n = 10000
		x := mustOpenTime(t, b, filepath.Join(dir, "a.timeindex"), concBase, 64*12)
		empty := TimeEntry{Timestamp: NoTimestamp, Offset: concBase}
		check := func(e TimeEntry) error {
			if e == empty {
				return nil
			}
			if i := (e.Timestamp - 1000) / 3; e != concTimeEntry(i) {
				return fmt.Errorf("torn or foreign entry %+v", e)
			}
			return nil
		}
		stop := runReaders(2, func(rng *rand.Rand) error {
			target := 990 + rng.Int64N(3*n+20)
			e := x.Lookup(target)
			if err := check(e); err != nil {
				return err
			}
			if e.Timestamp > target {
				return fmt.Errorf("Lookup(%d) = %+v, past the target", target, e)
			}
			return check(x.LastEntry())
		})
		poke, stopFlusher := runFlusher(x.Flush)
		rng := rand.New(rand.NewPCG(3, 4))
		for i := int64(0); i < n; {
			e := concTimeEntry(i)
			err := x.MaybeAppend(e.Timestamp, e.Offset, false)
			switch {
			case errors.Is(err, ErrIndexFull):
				if err := x.Resize((x.Entries() + 64) * 12); err != nil {
					t.Fatal(err)
				}
				continue
			case err != nil:
				t.Fatal(err)
			}
			i++
			if i%256 == 0 {
				poke()
			}
			if rng.IntN(200) == 0 {
				i = max(0, i-int64(rng.IntN(50)))
				if err := x.TruncateTo(concTimeEntry(i).Offset); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if err := stopFlusher(); err != nil {
			t.Fatal(err)
		}
		if x.LastEntry() != concTimeEntry(n-1) {
			t.Fatalf("LastEntry = %+v", x.LastEntry())
		}
	})
}
