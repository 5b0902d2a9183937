package kafkatest_test

import (
	"testing"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/vfs"
)

// BenchmarkFixture starts and stops what New starts and t.Cleanup stops:
// an in-memory broker with a 3-partition topic and a Kafka listener on
// loopback. (New itself needs a test of its own per fixture.)
func BenchmarkFixture(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		br, err := log.Open("/strata", log.Config{FS: vfs.NewMem(), DefaultTopic: log.TopicConfig{MaxIndexBytes: 4 << 10, SegmentBytes: 64 << 20}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := br.CreateTopic("orders", log.TopicConfig{Partitions: 3}); err != nil {
			b.Fatal(err)
		}
		srv, err := kafka.Listen("127.0.0.1:0", br, kafka.Config{})
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
		if err := br.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListen starts and stops the Kafka listener alone.
func BenchmarkListen(b *testing.B) {
	br, err := log.Open("/strata", log.Config{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	b.ReportAllocs()
	for b.Loop() {
		srv, err := kafka.Listen("127.0.0.1:0", br, kafka.Config{})
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
