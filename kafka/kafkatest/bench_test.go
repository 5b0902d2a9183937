package kafkatest_test

import (
	"testing"

	"github.com/strata-log/strata/internal/floor"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
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

// BenchmarkBareListener is BenchmarkListen's floor: a listener on
// loopback as kafka.Listen makes it, an accept goroutine, Close and the
// goroutine joined, with no server around them.
func BenchmarkBareListener(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := floor.Listener(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNew starts and stops the fixture as a test does, through New
// and its cleanups, with one topic of one partition (the bench module's
// `-case fixture` line-up, which runs kfake beside it).
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		tb := &cleanupTB{TB: b}
		c := kafkatest.New(tb, kafkatest.Topic("t", 1))
		if c.Addr() == "" {
			b.Fatal("no address")
		}
		tb.cleanup()
	}
}

// cleanupTB runs the fixture's cleanups when the benchmark says, not at
// its end.
type cleanupTB struct {
	testing.TB
	fns []func()
}

func (t *cleanupTB) Cleanup(fn func()) { t.fns = append(t.fns, fn) }
func (t *cleanupTB) cleanup() {
	for i := len(t.fns) - 1; i >= 0; i-- {
		t.fns[i]()
	}
	t.fns = nil
}
