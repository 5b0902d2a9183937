package log

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/vfs"
)

// purgatoryHooks is a Recorder that also tells ch every purgatory size.
type purgatoryHooks struct {
	*metrics.Recorder
	ch chan int
}

func (h purgatoryHooks) Purgatory(name string, size int) {
	h.Recorder.Purgatory(name, size)
	h.ch <- size
}

func fsyncs(r *metrics.Recorder) uint64 { return r.Snapshot().Fsync.Count }

// Appends to a topic that fsyncs every record raise the fsync count, one
// flush each; appends to one that leaves flushing to the OS do not.
func TestMetricsFsyncCount(t *testing.T) {
	leaktest.Check(t)
	rec := metrics.NewRecorder()
	clk := clocktest.New(t0) // the background loop stays idle
	b, err := Open("d", Config{FS: vfs.NewMem(), Clock: clk, Metrics: rec})
	require.NoError(t, err)
	defer b.Close()
	lazy := createT(t, b, "lazy", TopicConfig{})
	eager := createT(t, b, "eager", TopicConfig{FlushMessages: 1})
	base := fsyncs(rec) // creating topics may flush
	for i := range 5 {
		_, err := lazy.Append(Record{Value: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	require.Equal(t, base, fsyncs(rec), "FlushMessages 0: no fsync on append")
	for i := range 5 {
		_, err := eager.Append(Record{Value: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
		require.Equal(t, base+uint64(i+1), fsyncs(rec), "FlushMessages 1: one flush per append")
	}
	require.NoError(t, lazy.Flush())
	require.Equal(t, base+6, fsyncs(rec), "an explicit flush counts")
	var sb strings.Builder
	require.NoError(t, rec.Snapshot().WritePrometheus(&sb))
	require.Contains(t, sb.String(), fmt.Sprintf("kafka_log_logflushstats_logflush_seconds_count %d\n", base+6))
}

// A fetch that parks raises the fetch purgatory's size to 1; once an
// append completes it, the size is 0 again.
func TestMetricsFetchPurgatory(t *testing.T) {
	leaktest.Check(t)
	h := purgatoryHooks{metrics.NewRecorder(), make(chan int, 4)}
	clk := clocktest.New(t0) // the fetch never expires
	b, err := Open("d", Config{FS: vfs.NewMem(), Clock: clk, Metrics: h})
	require.NoError(t, err)
	defer b.Close()
	p := createT(t, b, "t", TopicConfig{})
	type result struct {
		resp FetchResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := b.Fetch(context.Background(), FetchRequest{
			Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}, Offset: 0}},
			MinBytes:   1, MaxWait: time.Hour,
		})
		done <- result{resp, err}
	}()
	require.Equal(t, 1, <-h.ch, "parked")
	require.Equal(t, []metrics.PurgatoryStats{{Name: "Fetch", Size: 1}}, h.Snapshot().Purgatories)
	_, err = p.Append(Record{Value: []byte("wake")})
	require.NoError(t, err)
	r := <-done
	require.NoError(t, r.err)
	defer r.resp.Release()
	require.Positive(t, r.resp.Partitions[0].Records.Len())
	require.Equal(t, 0, <-h.ch, "left")
	require.Equal(t, []metrics.PurgatoryStats{{Name: "Fetch", Size: 0}}, h.Snapshot().Purgatories)
}

// A cleaner pass reports the bytes it read and wrote.
func TestMetricsCleanerPass(t *testing.T) {
	rec := metrics.NewRecorder()
	b, p := compacted(t, vfs.NewMem(), TopicConfig{SegmentBytes: 1500, MinCleanableDirtyRatio: 0.01}, Config{Metrics: rec})
	defer b.Close()
	for i := range 400 {
		_, err := p.Append(Record{Key: []byte(fmt.Sprint("k", i%10)), Value: []byte(fmt.Sprint("v", i))})
		require.NoError(t, err)
	}
	require.NoError(t, p.Roll())
	before := p.Size()
	passes, err := b.cleaner.run(t0)
	require.NoError(t, err)
	require.Equal(t, 1, passes)
	c := rec.Snapshot().Cleaner
	require.EqualValues(t, 1, c.Passes)
	require.Equal(t, before, c.BytesRead, "the pass read every sealed segment (the active one is empty)")
	require.Equal(t, p.Size(), c.BytesWritten, "and wrote what is left")
	require.Less(t, c.BytesWritten, c.BytesRead/5)
}
