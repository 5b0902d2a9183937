package log

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/strata-log/strata/segment/batch"
)

// BenchmarkAppendBatchIdempotent appends encoded batches with AppendBatch,
// from an idempotent producer (each batch checked against the producer
// state, one map lookup) and without a producer id. Each op stamps the
// batch's base sequence and recomputes its CRC, in both variants so that
// the difference is the producer state's cost.
func BenchmarkAppendBatchIdempotent(b *testing.B) {
	for _, sz := range []struct{ size, batch int }{{100, 1}, {100, 10}, {100, 1000}} {
		for _, idem := range []bool{false, true} {
			name := fmt.Sprintf("record=%dB/batch=%d/producer=none", sz.size, sz.batch)
			if idem {
				name = fmt.Sprintf("record=%dB/batch=%d/producer=idempotent", sz.size, sz.batch)
			}
			b.Run(name, func(b *testing.B) {
				_, p := benchBroker(b, b.TempDir(), pageCache)
				pid := NoProducerID
				if idem {
					pid = 1
				}
				enc := producerBatchBytes(pid, 0, 0, sz.batch, 0)
				// Other producers the state also holds.
				for id := int64(2); idem && id < 100; id++ {
					if _, _, err := p.AppendBatch(producerBatchBytes(id, 0, 0, 1, 0)); err != nil {
						b.Fatal(err)
					}
				}
				const offBaseSequence = 53
				b.SetBytes(int64(len(enc)))
				b.ReportAllocs()
				m0, c0 := mallocs(), cpuTime()
				seq := int32(0)
				for b.Loop() {
					if idem {
						binary.BigEndian.PutUint32(enc[offBaseSequence:], uint32(seq))
						seq += int32(sz.batch)
					}
					batch.SetCRC(enc)
					if _, _, err := p.AppendBatch(enc); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportAppend(b, sz.batch, len(enc), mallocs()-m0, cpuTime()-c0)
			})
		}
	}
}
