package interop

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// rec is a record a test sends with some client and expects back through
// Strata's own API.
type rec struct {
	key, value []byte // nil key: the client picks the partition
	headers    []log.Header
	ts         time.Time // to the millisecond
}

// tsBase is the timestamp of the first record of makeRecs: fixed and in the
// past, so that a client or server that stamps "now" is caught.
var tsBase = time.UnixMilli(1_764_000_000_000)

// makeRecs returns n records with distinct values: keyed "<prefix>-key-i"
// (every tenth with a nil key), two headers (the second with an empty
// value), and timestamps 1 ms apart from tsBase.
func makeRecs(prefix string, n int) []rec {
	rs := make([]rec, n)
	for i := range rs {
		r := rec{
			value: fmt.Appendf(nil, "%s-value-%d:%s", prefix, i, bytes.Repeat([]byte{'a' + byte(i%26)}, 20+i%50)),
			headers: []log.Header{
				{Key: "trace", Value: fmt.Appendf(nil, "t-%d", i)},
				{Key: "empty", Value: []byte{}},
			},
			ts: tsBase.Add(time.Duration(i) * time.Millisecond),
		}
		if i%10 != 9 {
			r.key = fmt.Appendf(nil, "%s-key-%d", prefix, i)
		}
		rs[i] = r
	}
	return rs
}

// testCtx is a context bounded to d and to the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// stored returns every record of topic, partition by partition, read
// through Strata's own API (Partition.Read), not through the Kafka
// protocol.
func stored(t *testing.T, c *kafkatest.Cluster, topic string) [][]log.Record {
	t.Helper()
	return storedIn(t, c.Broker(), topic)
}

// storedIn is stored for any broker.
func storedIn(t *testing.T, b *log.Broker, topic string) [][]log.Record {
	t.Helper()
	tp, err := b.Topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]log.Record, tp.Partitions())
	for i := range out {
		p, err := tp.Partition(i)
		if err != nil {
			t.Fatal(err)
		}
		for off := p.StartOffset(); off < p.EndOffset(); {
			rs, err := p.Read(off, 1<<20)
			if err != nil {
				t.Fatalf("read %s/%d at %d: %v", topic, i, off, err)
			}
			if len(rs) == 0 {
				t.Fatalf("read %s/%d at %d: nothing below end offset %d", topic, i, off, p.EndOffset())
			}
			for _, r := range rs {
				if r.Offset >= off {
					out[i] = append(out[i], r)
				}
			}
			off = rs[len(rs)-1].Offset + 1
		}
	}
	return out
}

// partitioner says where a client puts a keyed record among n partitions;
// nil: the test does not check keyed placement.
type partitioner func(key []byte, n int) int

// javaPartitioner is the Java client's partitioner for keyed records, as
// Strata's log implements it.
var javaPartitioner partitioner = log.KeyPartition

// checkStored checks that the records of topic, read through Strata's
// API, are exactly want: each once, with its key, value, headers and
// timestamp, partitions in the order they were sent, and keyed records in
// the partition part gives them (when part is not nil).
func checkStored(t *testing.T, c *kafkatest.Cluster, topic string, want []rec, part partitioner) {
	t.Helper()
	checkStoredIn(t, c.Broker(), topic, want, part)
}

// checkStoredIn is checkStored for any broker.
func checkStoredIn(t *testing.T, b *log.Broker, topic string, want []rec, part partitioner) {
	t.Helper()
	byValue := make(map[string]int, len(want))
	for i, w := range want {
		byValue[string(w.value)] = i
	}
	seen := make([]bool, len(want))
	parts := storedIn(t, b, topic)
	n := 0
	for p, rs := range parts {
		last := -1
		for j, r := range rs {
			i, ok := byValue[string(r.Value)]
			if !ok {
				t.Fatalf("%s/%d offset %d: unexpected record value %.40q", topic, p, r.Offset, r.Value)
			}
			if seen[i] {
				t.Fatalf("%s/%d offset %d: record %d stored twice", topic, p, r.Offset, i)
			}
			seen[i] = true
			n++
			if r.Offset != int64(j) {
				t.Errorf("%s/%d: record %d at offset %d, want %d", topic, p, j, r.Offset, j)
			}
			if i < last {
				t.Errorf("%s/%d offset %d: record %d stored after record %d", topic, p, r.Offset, i, last)
			}
			last = i
			w := want[i]
			if !bytes.Equal(r.Key, w.key) || (r.Key == nil) != (w.key == nil) {
				t.Errorf("%s/%d offset %d: key %q, want %q", topic, p, r.Offset, r.Key, w.key)
			}
			if !r.Timestamp.Equal(w.ts) {
				t.Errorf("%s/%d offset %d: timestamp %v, want %v", topic, p, r.Offset, r.Timestamp.UnixMilli(), w.ts.UnixMilli())
			}
			if !sameHeaders(r.Headers, w.headers) {
				t.Errorf("%s/%d offset %d: headers %v, want %v", topic, p, r.Offset, r.Headers, w.headers)
			}
			if part != nil && w.key != nil {
				if wp := part(w.key, len(parts)); wp != p {
					t.Errorf("key %q stored in partition %d, the partitioner puts it in %d", w.key, p, wp)
				}
			}
		}
	}
	if n != len(want) {
		t.Fatalf("%s: %d records stored, want %d", topic, n, len(want))
	}
}

func sameHeaders(a, b []log.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}
