package segment

import (
	"sync/atomic"
	"testing"

	"github.com/strata-log/strata/vfs"
)

// BenchmarkTailFetch is a consumer at the end of the active segment, one
// record at a time: append a batch of one 100-byte record, find it with
// Range (what a fetch does) and read its bytes. preads/op counts the reads
// of the .log per fetch; one of them is the read of the batch itself.
func BenchmarkTailFetch(b *testing.B) {
	var reads atomic.Int64
	fs := logReads(vfs.Default, &reads)
	s, err := Create(fs, b.TempDir(), 0, Config{}, t0)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	recs := simple(1, 0, 100)
	f, err := s.files()
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	for range 1000 { // a segment well past its first index entries
		appendRecs(b, s, recs)
	}
	b.ReportAllocs()
	reads.Store(0)
	b.ResetTimer()
	for range b.N {
		off := s.NextOffset()
		appendRecs(b, s, recs)
		pos, length, _, err := s.Range(off, 1<<20, NoBound, true)
		if err != nil || length == 0 {
			b.Fatal(err, length)
		}
		if _, err := f.log.ReadAt(buf[:length], pos); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(reads.Load())/float64(b.N), "preads/op")
}
