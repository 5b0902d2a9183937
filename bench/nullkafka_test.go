package main

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestNullKafka: kgo's default (idempotent, snappy) producer gets its
// records acknowledged at consecutive offsets, and a consumer reads back,
// at consecutive offsets from 0, as many records as were produced, the
// values of the batch the responder kept (served more than once); past
// them its fetch waits, and every goroutine ends with close.
func TestNullKafka(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := startNullKafka()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.DefaultProduceTopic("bench"))
	if err != nil {
		t.Fatal(err)
	}
	value := payload(100)
	const n = 300
	for round := range 2 {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Value: value}
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if want := int64(round*n + i); r.Record.Offset != want {
				t.Fatalf("record %d acknowledged at offset %d", want, r.Record.Offset)
			}
		}
	}
	cl.Close()

	cons, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	const want = 2 * n // more than one batch's worth: the batch is served again
	var got int64
	for got < want {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, want, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != got || !bytes.Equal(r.Value, value) {
				t.Fatalf("record %d: offset %d, %d bytes", got, r.Offset, len(r.Value))
			}
			got++
		})
	}
	cons.Close()
	s.close()
	assertGoroutines(t, before)
}
