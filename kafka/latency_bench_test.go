package kafka

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchSignal is a Backend that tells when a Fetch reaches it.
type fetchSignal struct {
	*log.Broker
	fetching chan struct{}
}

func (b fetchSignal) Fetch(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error) {
	select {
	case b.fetching <- struct{}{}:
	default: // nobody waits for it
	}
	return b.Broker.Fetch(ctx, req)
}

// BenchmarkProduceConsumeLatency: a consumer's fetch is parked at the
// end of a partition (MaxWait 10 s); a producer on another connection sends
// one record (acks=1); the time from the produce request's write to the
// fetch response's last byte read is one sample. It reports the p50 and
// p99 of b.N samples (both clients in this process, over loopback, the
// partition on disk).
func BenchmarkProduceConsumeLatency(b *testing.B) {
	br := logtest.New(b, logtest.Topic("t", 1))
	be := fetchSignal{Broker: br, fetching: make(chan struct{}, 1)}
	s, err := Listen("127.0.0.1:0", be, Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	consumer, producer := dial(b, s.Addr()), dial(b, s.Addr())
	produce := produceReq(9, 1, "t", 0, records("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
	fetch := fetchReq(12, "t", 0, 0, 10*time.Second)
	samples := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	next := int64(0)
	for b.Loop() {
		fetch.Topics[0].Partitions[0].FetchOffset = next
		fc := consumer.send(fetch)
		<-be.fetching // at the backend, about to park
		start := time.Now()
		pc := producer.send(produce)
		fr := consumer.recv(fetch, fc).(*kmsg.FetchResponse)
		samples = append(samples, time.Since(start))
		p := fr.Topics[0].Partitions[0]
		if p.ErrorCode != errNone || len(p.RecordBatches) == 0 {
			b.Fatalf("fetch: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
		}
		if pr := producer.recv(produce, pc).(*kmsg.ProduceResponse); pr.Topics[0].Partitions[0].ErrorCode != errNone {
			b.Fatalf("produce: error %d", pr.Topics[0].Partitions[0].ErrorCode)
		}
		next = p.HighWatermark
	}
	slices.Sort(samples)
	at := func(q float64) float64 { return float64(samples[int(q*float64(len(samples)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
