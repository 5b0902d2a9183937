// Package logtest starts a Strata broker as a unit-test fixture: in a
// temporary directory (or on the in-memory file system), with topics created
// and seeded, closed by t.Cleanup.
//
//	func TestOrders(t *testing.T) {
//		b := logtest.New(t, logtest.Topic("orders", 3), logtest.InMemory())
//		p, _ := log.NewProducer(b, log.ProducerConfig{})
//		...
//	}
package logtest

import (
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/vfs"
)

// Option configures a fixture.
type Option func(*options)

type options struct {
	mem    bool
	fs     vfs.FS
	cfg    log.Config
	topics []topic
}

type topic struct {
	name string
	cfg  log.TopicConfig
	recs []log.Record
}

// InMemory puts the broker on a fresh in-memory file system: the fastest
// fixture, gone with the test.
func InMemory() Option { return func(o *options) { o.mem = true } }

// OnFS puts the broker on fs (for example a vfs.MemFS the test crashes).
func OnFS(fs vfs.FS) Option { return func(o *options) { o.fs = fs } }

// WithConfig sets the broker's configuration (its FS is set by the fixture).
func WithConfig(cfg log.Config) Option { return func(o *options) { o.cfg = cfg } }

// Topic creates a topic with n partitions.
func Topic(name string, partitions int) Option {
	return TopicWithConfig(name, log.TopicConfig{Partitions: partitions})
}

// TopicWithConfig creates a topic with cfg.
func TopicWithConfig(name string, cfg log.TopicConfig) Option {
	return func(o *options) { o.topics = append(o.topics, topic{name: name, cfg: cfg}) }
}

// Seed appends records to the named topic (created by an earlier Topic
// option, or with one partition) once the broker is up; each record goes to
// its Partition.
func Seed(name string, recs ...log.Record) Option {
	return func(o *options) {
		for i := range o.topics {
			if o.topics[i].name == name {
				o.topics[i].recs = append(o.topics[i].recs, recs...)
				return
			}
		}
		o.topics = append(o.topics, topic{name: name, recs: recs})
	}
}

// fixtureTopic is what the fixture's topics default to: small preallocated
// indexes (a segment rolls after about 2 MiB of records), so that a fixture
// starts in well under a millisecond per partition.
var fixtureTopic = log.TopicConfig{MaxIndexBytes: 4 << 10, SegmentBytes: 64 << 20}

// New starts a broker for the test and closes it in t.Cleanup (failing the
// test if Close fails). It fails the test at once if the broker cannot start.
// A broker on a data dir of its own (InMemory, or the default temporary
// directory) is opened with log.OpenEphemeral: it works as any broker, but
// writes no topics.json, checkpoint or clean-shutdown marker for an Open
// that will never come (its goroutines are joined and its records flushed
// all the same). A broker OnFS is opened with log.Open, so that the test
// can crash the FS and open it again.
func New(t testing.TB, opts ...Option) *log.Broker {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg := o.cfg
	dir := "/strata"
	// private: no one opens the data dir after the test (a fresh MemFS, or
	// a temporary directory removed at its end), so the broker is
	// ephemeral: it skips topics.json, the checkpoints and the
	// clean-shutdown marker, which only a later Open would read.
	private := true
	switch {
	case o.fs != nil:
		cfg.FS = o.fs
		private = false // the test may crash it and open it again
	case o.mem:
		cfg.FS = vfs.NewMem()
	default:
		dir = t.TempDir()
	}
	if cfg.DefaultTopic == (log.TopicConfig{}) {
		cfg.DefaultTopic = fixtureTopic
	}
	open := log.Open
	if private {
		open = log.OpenEphemeral
	}
	b, err := open(dir, cfg)
	if err != nil {
		t.Fatalf("logtest: open broker: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("logtest: close broker: %v", err)
		}
	})
	for _, tp := range o.topics {
		top, err := b.CreateTopic(tp.name, tp.cfg)
		if err != nil {
			t.Fatalf("logtest: create topic %s: %v", tp.name, err)
		}
		for _, r := range tp.recs {
			p, err := top.Partition(r.Partition)
			if err != nil {
				t.Fatalf("logtest: seed %s: %v", tp.name, err)
			}
			if _, err := p.Append(r); err != nil {
				t.Fatalf("logtest: seed %s: %v", tp.name, err)
			}
		}
	}
	return b
}
