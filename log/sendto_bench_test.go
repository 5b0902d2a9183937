package log

import (
	"fmt"
	"net"
	"sync"
	"testing"
)

// hiddenConn hides a *net.TCPConn behind another type: SendTo then copies
// instead of using sendfile.
type hiddenConn struct{ net.Conn }

// BenchmarkSendTo sends a partition of about 64 MiB (on the operating
// system's file system, in the page cache) over loopback TCP to a reader
// that discards, SendTo by SendTo of up to 1 MiB of whole batches: with
// sendfile, and with a copy forced. B/s counts the bytes sent; it also
// reports bytes per CPU-second of the process (both ends).
//
//	go test -run '^$' -bench 'SendTo' -benchtime 2s ./log/
func BenchmarkSendTo(b *testing.B) {
	for _, size := range []int{100, 1024} {
		for _, mode := range []string{"sendfile", "copy"} {
			b.Run(fmt.Sprintf("record=%dB/%s", size, mode), func(b *testing.B) {
				_, p := benchBroker(b, b.TempDir(), TopicConfig{})
				enc := encodedBatch(records(1000, size))
				for range max(8, (64<<20)/len(enc)) {
					if _, _, err := p.AppendBatch(enc); err != nil {
						b.Fatal(err)
					}
				}
				a, c := tcpPair()
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := make([]byte, 1<<20)
					for {
						if _, err := c.Read(buf); err != nil {
							return
						}
					}
				}()
				b.Cleanup(func() {
					a.Close()
					wg.Wait()
					c.Close()
				})
				var conn net.Conn = a
				if mode == "copy" {
					conn = hiddenConn{a}
				}
				const maxBytes = 1 << 20
				// Whole batches of len(enc) bytes: as many per SendTo as fit.
				b.SetBytes(int64(maxBytes / len(enc) * len(enc)))
				b.ReportAllocs()
				end, off, sent, c0 := p.EndOffset(), int64(0), int64(0), cpuTime()
				for b.Loop() {
					n, next, err := p.SendTo(conn, off, maxBytes)
					if err != nil {
						b.Fatal(err)
					}
					sent += n
					if off = next; off == end {
						off = 0
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(sent)/(cpuTime()-c0).Seconds()/1e6, "MB/cpu-s")
			})
		}
	}
}
