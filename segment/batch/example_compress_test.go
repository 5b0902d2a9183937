package batch_test

import (
	"bytes"
	"fmt"

	"github.com/strata-log/strata/segment/batch"
)

func ExampleBuilder_SetCompression() {
	var bd batch.Builder
	bd.SetCompression(batch.CompressionZstd) // kept across Reset
	bd.Reset(1_700_000_000_000)
	for i := range 100 {
		bd.Append(1_700_000_000_000+int64(i), fmt.Appendf(nil, "user-%d", i%10), bytes.Repeat([]byte(`{"event":"click"}`), 10), nil)
	}
	b := bd.Bytes()

	// Validate streams through the compressed records; Decode decompresses.
	h, err := batch.Validate(b)
	fmt.Println(h.Compression() == batch.CompressionZstd, h.NumRecords, len(b) < bd.Size()/10, err)
	n := 0
	_, err = batch.Decode(b, func(r *batch.Record) error { n++; return nil })
	fmt.Println(n, err)
	// Output:
	// true 100 true <nil>
	// 100 <nil>
}
