package index

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// go test -run '^$' -bench . -benchtime 2s ./index

const benchEntries = 1 << 20 // an 8 MiB offset index, as a 10 MiB MaxIndexBytes gives about

func benchBackends(b *testing.B, fn func(b *testing.B, be backend)) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) { fn(b, be) })
	}
}

func BenchmarkOffsetIndexAppend(b *testing.B) {
	benchBackends(b, func(b *testing.B, be backend) {
		x := mustOpenOffset(b, be, filepath.Join(b.TempDir(), "a.index"), 0, benchEntries*offsetEntrySize)
		b.SetBytes(offsetEntrySize)
		b.ReportAllocs()
		var i int64
		for b.Loop() {
			if err := x.Append(i, 64*i); err != nil {
				if !errors.Is(err, ErrIndexFull) {
					b.Fatal(err)
				}
				if err := x.TruncateTo(0); err != nil {
					b.Fatal(err)
				}
				i = 0
				continue
			}
			i++
		}
	})
}

func BenchmarkTimeIndexMaybeAppend(b *testing.B) {
	benchBackends(b, func(b *testing.B, be backend) {
		x := mustOpenTime(b, be, filepath.Join(b.TempDir(), "a.timeindex"), 0, benchEntries*timeEntrySize)
		b.SetBytes(timeEntrySize)
		b.ReportAllocs()
		var i int64
		for b.Loop() {
			if err := x.MaybeAppend(1000+i, i, false); err != nil {
				if !errors.Is(err, ErrIndexFull) {
					b.Fatal(err)
				}
				if err := x.TruncateTo(0); err != nil {
					b.Fatal(err)
				}
				i = 0
				continue
			}
			i++
		}
	})
}

// lookupTargets returns targets in [lo, hi): "random" over the whole index
// (mostly the cold section) or "recent" (the last 1000 entries, the warm
// section: what in-sync consumers ask for).
func lookupTargets(lo, hi int64) map[string][]int64 {
	rng := rand.New(rand.NewPCG(1, 2))
	random, recent := make([]int64, 4096), make([]int64, 4096)
	for i := range random {
		random[i] = lo + rng.Int64N(hi-lo)
		recent[i] = hi - 1 - rng.Int64N((hi-lo)/benchEntries*1000)
	}
	return map[string][]int64{"random": random, "recent": recent}
}

func fullOffsetIndex(b *testing.B, be backend) *OffsetIndex {
	x := mustOpenOffset(b, be, filepath.Join(b.TempDir(), "a.index"), 0, benchEntries*offsetEntrySize)
	for i := range int64(benchEntries) {
		if err := x.Append(2*i, 100*i); err != nil {
			b.Fatal(err)
		}
	}
	return x
}

func BenchmarkOffsetIndexLookup(b *testing.B) {
	benchBackends(b, func(b *testing.B, be backend) {
		x := fullOffsetIndex(b, be)
		for _, kind := range []string{"random", "recent"} {
			targets := lookupTargets(0, 2*benchEntries)[kind]
			b.Run(kind, func(b *testing.B) {
				b.ReportAllocs()
				var i int
				for b.Loop() {
					t := targets[i%len(targets)]
					if e := x.Lookup(t); e.Offset > t || e.Offset < t-1 {
						b.Fatalf("Lookup(%d) = %+v", t, e)
					}
					i++
				}
			})
		}
	})
}

// BenchmarkOffsetIndexLookupParallel measures concurrent readers, which
// share the read lock (and the cache line of its counter).
func BenchmarkOffsetIndexLookupParallel(b *testing.B) {
	x := fullOffsetIndex(b, backends[0])
	targets := lookupTargets(0, 2*benchEntries)["recent"]
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(targets))
		for pb.Next() {
			x.Lookup(targets[i%len(targets)])
			i++
		}
	})
}

func BenchmarkTimeIndexLookup(b *testing.B) {
	benchBackends(b, func(b *testing.B, be backend) {
		x := mustOpenTime(b, be, filepath.Join(b.TempDir(), "a.timeindex"), 0, (benchEntries+1)*timeEntrySize)
		for i := range int64(benchEntries) {
			if err := x.MaybeAppend(1000+3*i, i, false); err != nil {
				b.Fatal(err)
			}
		}
		for _, kind := range []string{"random", "recent"} {
			targets := lookupTargets(1000, 1000+3*benchEntries)[kind]
			b.Run(kind, func(b *testing.B) {
				b.ReportAllocs()
				var i int
				for b.Loop() {
					t := targets[i%len(targets)]
					if e := x.Lookup(t); e.Timestamp > t || e.Timestamp < t-2 {
						b.Fatalf("Lookup(%d) = %+v", t, e)
					}
					i++
				}
			})
		}
	})
}
