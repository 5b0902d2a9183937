package log_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/vfs"
)

// The partition's side of the idempotent producer: check each batch, append
// only what is new, record it; snapshot on roll; rebuild on open.
func ExampleProducerState() {
	fs := vfs.NewMem()
	const dir = "/data/orders-0"
	_ = fs.MkdirAll(dir, 0o755)

	// InitProducerID: an id never given before on this broker.
	ids, _ := log.OpenProducerIDBlocks(fs, "/data", 0)
	id, epoch, _ := log.NewProducerIDAllocator(ids).InitProducerID(context.Background())

	ps := log.NewProducerState(0) // an empty log
	var next int64                // the partition's end offset
	produce := func(seq, records int32) {
		b := log.ProducerBatch{ProducerID: id, Epoch: epoch, BaseSequence: seq, LastOffsetDelta: records - 1, MaxTimestamp: 1000}
		c, err := ps.Check(b)
		switch {
		case err != nil:
			fmt.Println("refused:", errors.Is(err, log.ErrOutOfOrderSequence))
		case c.Duplicate:
			fmt.Println("duplicate, first stored at", c.FirstOffset)
		default:
			base := next // append the batch at base...
			next += int64(records)
			ps.Update(b, base) // ...then record it
			fmt.Println("appended at", base)
		}
	}
	produce(0, 3)
	produce(3, 2)
	produce(0, 3) // a retry whose acknowledgement was lost
	produce(9, 1) // a gap

	// On roll (and on close): a snapshot at the state's end offset.
	name, _ := log.WriteProducerSnapshot(fs, dir, ps)

	// On open: the newest usable snapshot (a partition loads it with the
	// others in its directory), then the log after it, then expiration.
	ps, _ = log.ReadProducerSnapshot(fs, name)
	// ... ps.ReplayBatches(segment bytes from ps.EndOffset()) ...
	ps.Expire(time.UnixMilli(1000).Add(time.Hour), 0)
	produce(3, 2)
	// Output:
	// appended at 0
	// appended at 3
	// duplicate, first stored at 0
	// refused: true
	// duplicate, first stored at 3
}
