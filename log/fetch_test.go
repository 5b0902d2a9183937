package log

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strata-log/strata/vfs"
	"github.com/stretchr/testify/require"
)

// fetchedBytes returns the bytes of fp's records and releases them.
func fetchedBytes(t *testing.T, fp *FetchedPartition) []byte {
	t.Helper()
	require.NoError(t, fp.Err)
	raw, err := fp.Records.Bytes()
	require.NoError(t, err)
	fp.Records.Release()
	return raw
}

func TestFetchLongPoll(t *testing.T) { synctest.Test(t, testFetchLongPoll) }

func testFetchLongPoll(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	defer b.Close()
	tp, err := b.CreateTopic("t", TopicConfig{Partitions: 2})
	require.NoError(t, err)
	p1, _ := tp.Partition(1)
	req := FetchRequest{
		Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, Offset: 0}, {TopicPartition: TopicPartition{Topic: "t", Partition: 1}, Offset: 0}},
		MaxWait:    time.Hour,
	}
	got := make(chan FetchResponse)
	go func() {
		resp, err := b.Fetch(context.Background(), req)
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	// The fetch is parked; an append to partition 1 completes it.
	synctest.Wait()
	require.Equal(t, 1, b.fetches.Pending())
	_, err = p1.Append(rec(0))
	require.NoError(t, err)
	start := time.Now()
	resp := <-got
	require.Zero(t, time.Since(start), "completed by the append, not by a timer")
	require.Len(t, resp.Partitions, 2)
	require.Zero(t, resp.Partitions[0].Records.Len())
	recs, err := DecodeRecords(fetchedBytes(t, &resp.Partitions[1]))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.EqualValues(t, 1, resp.Partitions[1].HighWatermark)

	// Data already there: no wait at all.
	resp, err = b.Fetch(context.Background(), req)
	require.NoError(t, err)
	require.NotEmpty(t, fetchedBytes(t, &resp.Partitions[1]))

	// Unknown partitions answer per partition.
	resp, err = b.Fetch(context.Background(), FetchRequest{Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "nope", Partition: 0}, Offset: 0}}})
	require.NoError(t, err)
	require.ErrorIs(t, resp.Partitions[0].Err, ErrUnknownTopic)
	resp, err = b.Fetch(context.Background(), FetchRequest{Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t", Partition: 1}, Offset: 9}}})
	require.NoError(t, err)
	require.ErrorIs(t, resp.Partitions[0].Err, ErrOffsetOutOfRange)
}

func TestFetchMinBytesAndMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openT(t, vfs.NewMem(), "/d")
		defer b.Close()
		p := createT(t, b, "t", TopicConfig{})
		req := FetchRequest{Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, Offset: 0}}, MinBytes: 300, MaxWait: 2 * time.Second}
		start := time.Now()
		got := make(chan FetchResponse)
		go func() {
			resp, err := b.Fetch(context.Background(), req)
			if err != nil {
				t.Error(err)
			}
			got <- resp
		}()
		synctest.Wait()
		_, err := p.Append(rec(0)) // ~80 bytes: not enough
		require.NoError(t, err)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("completed below MinBytes")
		default:
		}
		resp := <-got // at MaxWait, with what there is
		require.GreaterOrEqual(t, time.Since(start), 2*time.Second)
		require.NotEmpty(t, fetchedBytes(t, &resp.Partitions[0]))
	})
}

func TestFetchCancelAndClose(t *testing.T) { synctest.Test(t, testFetchCancelAndClose) }

func testFetchCancelAndClose(t *testing.T) {
	b := openT(t, vfs.NewMem(), "/d")
	createT(t, b, "t", TopicConfig{})
	req := FetchRequest{Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t", Partition: 0}, Offset: 0}}, MaxWait: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := b.Fetch(ctx, req)
		errc <- err
	}()
	synctest.Wait()
	require.Equal(t, 1, b.fetches.Pending())
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Zero(t, b.fetches.Pending())

	go func() {
		_, err := b.Fetch(context.Background(), req)
		errc <- err
	}()
	synctest.Wait()
	require.Equal(t, 1, b.fetches.Pending())
	require.NoError(t, b.Close())
	err := <-errc
	require.True(t, errors.Is(err, ErrClosed), "%v", err)
}

// TestFetchOnDeletedTopic: a fetch parked on a topic that is deleted returns
// at once, with the partition's error.
func TestFetchOnDeletedTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := openT(t, vfs.NewMem(), "/d")
		defer b.Close()
		createT(t, b, "t", TopicConfig{})
		got := make(chan FetchResponse)
		go func() {
			resp, err := b.Fetch(context.Background(), FetchRequest{
				Partitions: []FetchPartition{{TopicPartition: TopicPartition{Topic: "t"}, Offset: 0}}, MaxWait: time.Hour})
			if err != nil {
				t.Error(err)
			}
			got <- resp
		}()
		synctest.Wait()
		start := time.Now()
		require.NoError(t, b.DeleteTopic("t"))
		resp := <-got
		require.Zero(t, time.Since(start))
		require.Error(t, resp.Partitions[0].Err)
	})
}
