package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-log/strata/log"
)

// benchDirs holds the data dirs the benchmarks write once per process, by
// record size; TestMain's temp dir holds them.
var benchDirs = map[int]string{}

// benchDataDir returns a data dir of about 256 MiB of segments: 2 partitions
// of 64 MiB segments, batches of 16 KiB of recordSize-byte records.
func benchDataDir(b *testing.B, recordSize int) (string, int64) {
	b.Helper()
	dir, ok := benchDirs[recordSize]
	if !ok {
		dir = filepath.Join(filepath.Dir(strataBin), fmt.Sprintf("bench-%d", recordSize))
		br, err := log.Open(dir, log.Config{})
		if err != nil {
			b.Fatal(err)
		}
		top, err := br.CreateTopic("bench", log.TopicConfig{Partitions: 2, SegmentBytes: 64 << 20})
		if err != nil {
			b.Fatal(err)
		}
		perBatch := max(1, 16<<10/recordSize)
		value := make([]byte, recordSize)
		for i := range value {
			value[i] = byte(i * 7)
		}
		recs := make([]log.Record, perBatch)
		for i := range recs {
			recs[i].Value = value
		}
		for pi := range 2 {
			p, err := top.Partition(pi)
			if err != nil {
				b.Fatal(err)
			}
			for p.Size() < 128<<20 {
				if _, err := p.Append(recs...); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
		benchDirs[recordSize] = dir
	}
	var total int64
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	for _, l := range logs {
		fi, err := os.Stat(l)
		if err != nil {
			b.Fatal(err)
		}
		total += fi.Size()
	}
	return dir, total
}

// BenchmarkVerify reads a data dir from the page cache (the first, untimed
// run brings it there) and checks everything verify checks. The figure is
// bytes of segments per second, with as many partitions checked at once as
// GOMAXPROCS (verify's default --jobs). raw-read is the limit in the same
// run: reading the same .log files in the same 1 MiB chunks on as many
// goroutines, and doing nothing with them.
//
//	go test -run '^$' -bench BenchmarkVerify -benchtime 10x ./cmd/strata
func BenchmarkVerify(b *testing.B) {
	b.Run("raw-read", func(b *testing.B) {
		dir, total := benchDataDir(b, 1000)
		logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
		read := func() {
			var n atomic.Int64
			var wg sync.WaitGroup
			jobs := make(chan string)
			for range runtime.GOMAXPROCS(0) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]byte, chunkBytes)
					for path := range jobs {
						f, err := os.Open(path)
						if err != nil {
							b.Error(err)
							continue
						}
						for off := int64(0); ; {
							k, err := f.ReadAt(buf, off)
							off += int64(k)
							n.Add(int64(k))
							if err != nil {
								break
							}
						}
						f.Close()
					}
				}()
			}
			for _, path := range logs {
				jobs <- path
			}
			close(jobs)
			wg.Wait()
			if n.Load() != total {
				b.Fatalf("read %d of %d bytes", n.Load(), total)
			}
		}
		read()
		b.SetBytes(total)
		b.ResetTimer()
		for range b.N {
			read()
		}
	})
	for _, size := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			dir, total := benchDataDir(b, size)
			verify := func() {
				v := &verifier{out: io.Discard, dir: dir, jobs: runtime.GOMAXPROCS(0)}
				if err := v.run(); err != nil {
					b.Fatal(err)
				}
				if v.problems != 0 || v.bytes != total {
					b.Fatalf("%d problems, %d of %d bytes read", v.problems, v.bytes, total)
				}
			}
			verify() // into the page cache
			b.SetBytes(total)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				verify()
			}
		})
	}
}
