package batch_test

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/segment/batch"
)

func ExampleBuilder() {
	var bd batch.Builder
	bd.Reset(1_700_000_000_000) // the first record's timestamp
	bd.Append(1_700_000_000_000, []byte("user-1"), []byte("signed up"), nil)
	bd.Append(1_700_000_000_250, []byte("user-1"), []byte("logged in"),
		[]batch.RecordHeader{{Key: "ip", Value: []byte("10.0.0.7")}})
	b := bd.Bytes()

	// A broker assigns offsets after encoding, under its lock; the CRC stays valid.
	batch.SetBaseOffset(b, 42)

	h, err := batch.Validate(b)
	fmt.Println(len(b), h.NumRecords, h.BaseOffset, h.NextOffset(), err)
	// Output: 118 2 42 44 <nil>
}

func ExampleDecode() {
	var bd batch.Builder
	bd.Reset(1000)
	bd.Append(1000, []byte("k"), []byte("v1"), nil)
	bd.Append(1005, nil, []byte("v2"), []batch.RecordHeader{{Key: "h", Value: []byte("x")}})
	b := bd.Bytes()
	batch.SetBaseOffset(b, 7)

	_, err := batch.Decode(b, func(r *batch.Record) error {
		// r and its slices alias b and are valid only during the call: copy what you keep.
		fmt.Printf("offset %d ts %d key %q value %q headers %d\n", r.Offset, r.Timestamp, r.Key, r.Value, len(r.Headers))
		return nil
	})
	fmt.Println(err)
	// Output:
	// offset 7 ts 1000 key "k" value "v1" headers 0
	// offset 8 ts 1005 key "" value "v2" headers 1
	// <nil>
}

func ExampleBatches() {
	// Two batches as a segment file holds them, the second torn by a crash.
	var log []byte
	var bd batch.Builder
	for i := range 2 {
		bd.Reset(0)
		bd.Append(0, nil, []byte("record"), nil)
		b := bd.Bytes()
		batch.SetBaseOffset(b, int64(i))
		log = append(log, b...)
	}
	log = log[:len(log)-5]

	valid := 0
	err := batch.Batches(log, func(b []byte, h batch.Header) error {
		valid += len(b)
		return nil
	})
	fmt.Println(valid, errors.Is(err, batch.ErrShort))
	// Output: 74 true
}
