package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
)

var regen = flag.Bool("regen", false, "regenerate the segment files under testdata (then run -update for the golden output)")

// baseTime is the first record timestamp of the generated data: fixed, so
// that the files and the golden output do not change between runs.
var baseTime = time.UnixMilli(1_700_000_000_000)

// TestRegenerateTestdata writes the committed test data with -regen:
//
//	testdata/data/              a data dir written by log.Open: topic "events"
//	                            with 2 partitions, small segments and a dense
//	                            index, records with keys, headers, null values
//	testdata/segments/crafted/  a .log whose batches the log package does not
//	                            write yet: an idempotent producer's, a
//	                            transactional one and a LogAppendTime one
//	testdata/segments/gzipflag/ a batch flagged gzip whose records are not:
//	                            a compressed batch that does not decompress
func TestRegenerateTestdata(t *testing.T) {
	if !*regen {
		t.Skip("run with -regen to rewrite the segment files under testdata")
	}
	dir := filepath.Join("testdata", "data")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		t.Fatal(err)
	}
	top, err := b.CreateTopic("events", log.TopicConfig{Partitions: 2, SegmentBytes: 700, IndexIntervalBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	for pi := range 2 {
		p, err := top.Partition(pi)
		if err != nil {
			t.Fatal(err)
		}
		for bi := range 6 {
			var recs []log.Record
			for ri := range 3 {
				i := bi*3 + ri
				r := log.Record{
					Timestamp: baseTime.Add(time.Duration(pi*100+i) * time.Second),
					Key:       []byte(fmt.Sprintf("key-%d", i)),
					Value:     []byte(fmt.Sprintf("value %d of partition %d", i, pi)),
				}
				switch i % 5 {
				case 1:
					r.Headers = []log.Header{{Key: "trace", Value: []byte(fmt.Sprintf("t%d", i))}, {Key: "empty", Value: nil}}
				case 3:
					r.Value = nil // a tombstone
				case 4:
					r.Key = nil
				}
				recs = append(recs, r)
			}
			if _, err := p.Append(recs...); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, ".lock"))

	crafted := filepath.Join("testdata", "segments", "crafted")
	if err := os.MkdirAll(crafted, 0o755); err != nil {
		t.Fatal(err)
	}
	var file []byte
	next := int64(0)
	add := func(build func(bd *batch.Builder), attrs uint16) {
		var bd batch.Builder
		bd.Reset(baseTime.UnixMilli())
		build(&bd)
		raw := append([]byte(nil), bd.Bytes()...)
		batch.SetBaseOffset(raw, next)
		batch.SetPartitionLeaderEpoch(raw, 3)
		if attrs != 0 {
			binary.BigEndian.PutUint16(raw[offAttributes:], binary.BigEndian.Uint16(raw[offAttributes:])|attrs)
			batch.SetCRC(raw)
		}
		h, err := batch.ParseHeader(raw)
		if err != nil {
			t.Fatal(err)
		}
		next = h.NextOffset()
		file = append(file, raw...)
	}
	ts := baseTime.UnixMilli()
	add(func(bd *batch.Builder) { // idempotent
		bd.SetProducer(4242, 7, 100)
		for i := range 3 {
			bd.Append(ts+int64(i), []byte("pk"), []byte(fmt.Sprintf("idempotent %d", i)), nil)
		}
	}, 0)
	add(func(bd *batch.Builder) { // transactional
		bd.SetProducer(4243, 1, 0)
		bd.Append(ts+10, nil, []byte("in a transaction"), []batch.RecordHeader{{Key: "tx", Value: []byte("1")}})
	}, 0x10)
	add(func(bd *batch.Builder) { // LogAppendTime
		bd.Append(ts+20, []byte("k"), []byte("appended at broker time"), nil)
		bd.Append(ts+21, []byte("k"), []byte("binary \x00\x01\xff"), nil)
	}, 0x08)
	if err := os.WriteFile(filepath.Join(crafted, "00000000000000000000.log"), file, 0o644); err != nil {
		t.Fatal(err)
	}

	// A batch whose attributes say gzip over records that are not (its CRC
	// is right): dump and verify report it as damaged.
	file, next = nil, 0
	add(func(bd *batch.Builder) {
		bd.Append(ts+30, []byte("z"), []byte("pretend this is gzip"), nil)
	}, 0x01)
	gz := filepath.Join("testdata", "segments", "gzipflag")
	if err := os.MkdirAll(gz, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gz, "00000000000000000000.log"), file, 0o644); err != nil {
		t.Fatal(err)
	}
}
