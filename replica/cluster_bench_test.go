package replica_test

import (
	"context"
	"fmt"
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
// than the wall-clock figures, and the part of it spent in the kernel
// (sys-ms/MB): with RF 3 that is most of what replication adds, the
// leader's sendfile to each follower and each follower's read and write(2)
// of the bytes. Runs of 500,000 records weigh the cluster's start (its
// elections, the first ISR, a cold page cache) less than shorter ones:
//
//	go test -run '^$' -bench 'ClusterProduce$' -benchtime 500000x ./replica/
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
			user0, sys0 := processCPUSplit()
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
			mb := float64(b.N) * float64(len(val)) / 1e6
			user, sys := processCPUSplit()
			b.ReportMetric(float64(user+sys-user0-sys0)/float64(time.Millisecond)/mb, "cpu-ms/MB")
			b.ReportMetric(float64(sys-sys0)/float64(time.Millisecond)/mb, "sys-ms/MB")
			require.NoError(b, prod.Close())
			select {
			case err := <-errs:
				b.Fatal(err)
			default:
			}
		})
	}
}

// BenchmarkClusterProduceCompressed is BenchmarkClusterProduce's
// idempotent acks=all rows with lz4 and zstd batches of 1 KB JSON-like
// records (default batch size): what replication costs when followers
// check each batch's CRC and not its records, as Kafka's do.
//
//	go test -run '^$' -bench ClusterProduceCompressed -benchtime 100000x ./replica/
func BenchmarkClusterProduceCompressed(b *testing.B) {
	vals := jsonLike(1024, 1000)
	for _, codec := range []log.Compression{log.CompressionLz4, log.CompressionZstd} {
		for _, rf := range []int{1, 3} {
			b.Run(fmt.Sprintf("%v-rf%d", codec, rf), func(b *testing.B) {
				c := startClusterOver(b, 3, "kafka")
				c.createTopic("t", log.TopicConfig{Partitions: 1, ReplicationFactor: rf, MinInSyncReplicas: min(2, rf)})
				prod, err := log.NewProducer(c.any(c.leader("t", 0)), log.ProducerConfig{
					Acks: log.AcksAll, Idempotent: true, Compression: codec, Timeout: 30 * time.Second})
				require.NoError(b, err)
				b.SetBytes(int64(len(vals[0])))
				b.ResetTimer()
				cpu0 := processCPU()
				for i := range b.N {
					prod.SendAsync(log.Record{Topic: "t", Value: vals[i%len(vals)]}, nil)
				}
				require.NoError(b, prod.Flush(context.Background()))
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Millisecond)/(float64(b.N)*float64(len(vals[0]))/1e6), "cpu-ms/MB")
				require.NoError(b, prod.Close())
			})
		}
	}
}

// jsonLike returns k JSON documents of size bytes, alike in shape and
// different in content: they compress several to one, not to nothing.
func jsonLike(k, size int) [][]byte {
	x := uint32(2463534242)
	rnd := func() uint32 { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x }
	out := make([][]byte, k)
	for i := range out {
		v := fmt.Appendf(nil, `{"id":"evt-%08x","amount":%d,"tags":[`, rnd(), rnd()%100_000)
		for len(v) < size {
			v = fmt.Appendf(v, `{"k":"w%d","v":%d,"ref":"%08x"},`, rnd()%8, rnd()%10_000, rnd())
		}
		out[i] = append(v[:size-2], "]}"...)
	}
	return out
}
