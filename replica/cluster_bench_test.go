package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/log"
)

// BenchmarkClusterProduce compares acks=all with RF 3 to acks=leader with
// RF 1 on three in-process members replicating over the Kafka protocol (the
// issue's target: ≥ 0.6×). Records of 1 KiB, through a log.Producer on a
// member that does not lead the partition (so both forward once). Besides
// the throughput it reports the CPU the process (all three members and the
// producer) spent per MB produced, which a loaded machine distorts less
// than the wall-clock figures.
//
//	go test -run '^$' -bench ClusterProduce -benchtime 100000x ./replica/
func BenchmarkClusterProduce(b *testing.B) {
	for _, tc := range []struct {
		name       string
		rf         int
		acks       log.Acks
		idempotent bool // 5 batches in flight per partition, not 1
	}{
		{"rf1-acks1", 1, log.AcksLeader, false},
		{"rf3-acksall", 3, log.AcksAll, false},
		// An idempotent producer needs acks=all; with RF 1 that is the
		// leader's acknowledgement, as acks=1.
		{"rf1-acksall-idempotent", 1, log.AcksAll, true},
		{"rf3-acksall-idempotent", 3, log.AcksAll, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := startClusterOver(b, 3, "kafka")
			c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: tc.rf, MinInSyncReplicas: min(2, tc.rf)})
			via := c.any(c.leader("t", 0))
			prod, err := log.NewProducer(via, log.ProducerConfig{Acks: tc.acks, Idempotent: tc.idempotent, Timeout: 30 * time.Second, BatchBytes: 256 << 10})
			require.NoError(b, err)
			val := make([]byte, 1024)
			b.SetBytes(int64(len(val)))
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			errs := make(chan error, 1)
			for range b.N {
				prod.SendAsync(log.Record{Topic: "t", Value: val}, func(_ log.Record, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
				})
			}
			require.NoError(b, prod.Flush(context.Background()))
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/(float64(b.N)*float64(len(val))/1e6), "cpu-ms/MB")
			require.NoError(b, prod.Close())
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
		})
	}
}
