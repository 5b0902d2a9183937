package kafka

import (
	"fmt"
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchServer serves an in-memory broker with topic "t" and no log lines.
func benchServer(b *testing.B, opts ...logtest.Option) (*Server, *log.Broker) {
	br := logtest.New(b, append([]logtest.Option{logtest.InMemory(), logtest.TopicWithConfig("t", log.TopicConfig{Partitions: 1, SegmentBytes: 1 << 30, MaxIndexBytes: 1 << 20})}, opts...)...)
	s, err := Listen("127.0.0.1:0", br, Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, br
}

// BenchmarkProduce pipelines produce requests (acks=1) of one batch of
// 100 records on one connection, 16 in flight.
func BenchmarkProduce(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("record=%dB", size), func(b *testing.B) {
			s, _ := benchServer(b)
			c := dial(b, s.Addr())
			vals := make([]string, 100)
			for i := range vals {
				vals[i] = string(make([]byte, size))
			}
			recs := records(vals...)
			req := produceReq(9, 1, "t", 0, recs)
			frame := c.f.AppendRequest(nil, req, 0)
			b.SetBytes(int64(len(recs)))
			b.ReportAllocs()
			const window = 16
			inFlight := 0
			b.ResetTimer()
			for i := range b.N {
				_ = i
				c.write(frame)
				inFlight++
				if inFlight == window {
					if _, err := c.frame(); err != nil {
						b.Fatal(err)
					}
					inFlight--
				}
			}
			for ; inFlight > 0; inFlight-- {
				if _, err := c.frame(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFetch reads 1 MiB per request from a seeded partition.
func BenchmarkFetch(b *testing.B) {
	s, br := benchServer(b)
	p, _ := br.Partition("t", 0)
	val := make([]byte, 1000)
	for range 64 {
		recs := make([]log.Record, 100)
		for i := range recs {
			recs[i].Value = val
		}
		if _, err := p.Append(recs...); err != nil {
			b.Fatal(err)
		}
	}
	c := dial(b, s.Addr())
	req := fetchReq(12, "t", 0, 0, 0)
	req.MinBytes = 0
	resp := c.do(req).(*kmsg.FetchResponse)
	n := len(resp.Topics[0].Partitions[0].RecordBatches)
	if n < 1<<19 {
		b.Fatalf("fetched %d bytes", n)
	}
	frame := c.f.AppendRequest(nil, req, 0)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.write(frame)
		if _, err := c.frame(); err != nil {
			b.Fatal(err)
		}
	}
}
