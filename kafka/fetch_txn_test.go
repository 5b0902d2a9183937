package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnRecords is records as producer pid's transactional batch.
func txnRecords(pid int64, seq int32, values ...string) []byte {
	var bd batch.Builder
	ts := time.Now().UnixMilli()
	bd.Reset(ts)
	bd.SetProducer(pid, 0, seq)
	for _, v := range values {
		bd.Append(ts, nil, []byte(v), nil)
	}
	b := append([]byte(nil), bd.Bytes()...)
	b[22] |= 0x10 // attributes: transactional
	batch.SetCRC(b)
	return b
}

// txnLog appends to p: producer 1's aborted transaction a1 a2 (0, 1),
// x (2), producer 2's committed c1 (3), the markers (4, 5), producer 3's
// open transaction o1 (6), y (7). The LSO is 6.
func txnLog(t *testing.T, p *log.Partition) {
	t.Helper()
	_, _, err := p.AppendBatch(txnRecords(1, 0, "a1", "a2"))
	require.NoError(t, err)
	_, err = p.Append(log.Record{Value: []byte("x")})
	require.NoError(t, err)
	_, _, err = p.AppendBatch(txnRecords(2, 0, "c1"))
	require.NoError(t, err)
	_, err = p.AppendMarker(batch.Marker{ProducerID: 1})
	require.NoError(t, err)
	_, err = p.AppendMarker(batch.Marker{ProducerID: 2, Commit: true})
	require.NoError(t, err)
	_, _, err = p.AppendBatch(txnRecords(3, 0, "o1"))
	require.NoError(t, err)
	_, err = p.Append(log.Record{Value: []byte("y")})
	require.NoError(t, err)
	require.EqualValues(t, 6, p.LastStableOffset())
}

// TestFetchReadCommitted: a Fetch at isolation level read_committed (v4+)
// reads below the LSO and answers it and the aborted transactions of what
// it read; read_uncommitted reads to the high watermark, answers the LSO
// and no aborted transactions. ListOffsets latest at read_committed (v2+)
// is the LSO.
func TestFetchReadCommitted(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 1))
	p, err := b.Partition("t", 0)
	require.NoError(t, err)
	txnLog(t, p)
	c := dial(t, s.Addr())
	for v := int16(4); v <= 16; v++ {
		for _, iso := range []int8{0, 1} {
			req := fetchReq(v, "t", 0, 0, time.Millisecond)
			req.IsolationLevel = iso
			resp := c.do(req).(*kmsg.FetchResponse)
			fp := resp.Topics[0].Partitions[0]
			require.Equal(t, errNone, fp.ErrorCode)
			require.EqualValues(t, 8, fp.HighWatermark, "v%d", v)
			require.EqualValues(t, 6, fp.LastStableOffset, "v%d", v)
			got := values(t, fp.RecordBatches)
			if iso == 0 {
				require.Equal(t, []string{"a1", "a2", "x", "c1", "o1", "y"}, got, "v%d", v)
				require.Nil(t, fp.AbortedTransactions)
				continue
			}
			require.Equal(t, []string{"a1", "a2", "x", "c1"}, got, "v%d: the aborted ones are the client's to drop", v)
			require.Equal(t, []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 1, FirstOffset: 0}}, fp.AbortedTransactions, "v%d", v)
		}
	}
	for v := int16(2); v <= 6; v++ {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(v)
		req.IsolationLevel = 1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := c.do(req).(*kmsg.ListOffsetsResponse)
		require.EqualValues(t, 6, resp.Topics[0].Partitions[0].Offset, "v%d", v)
	}
}

// TestClientReadCommitted: a log.Consumer over a kafka.Client reads as one
// over the broker: read_committed, the committed and plain records below
// the LSO, starting at the LSO for ResetLatest; read_uncommitted, every
// data record; never a marker.
func TestClientReadCommitted(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("t", 1))
	p, err := b.Partition("t", 0)
	require.NoError(t, err)
	txnLog(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer kc.Close()
	off, err := kc.ListOffset(ctx, log.TopicPartition{Topic: "t"}, log.LatestStableOffset)
	require.NoError(t, err)
	require.EqualValues(t, 6, off)

	read := func(level log.IsolationLevel, reset log.OffsetReset, end int64) []string {
		cons, err := log.NewConsumer(kc, log.ConsumerConfig{Topics: []string{"t"}, Isolation: level, Reset: reset, MaxWait: time.Millisecond})
		require.NoError(t, err)
		defer cons.Close()
		var got []string
		for {
			pos, err := cons.Position("t", 0)
			require.NoError(t, err)
			if pos >= end {
				return got
			}
			recs, err := cons.Poll(ctx)
			require.NoError(t, err)
			for _, r := range recs {
				got = append(got, string(r.Value))
			}
		}
	}
	require.Equal(t, []string{"x", "c1"}, read(log.ReadCommitted, log.ResetEarliest, 6))
	require.Equal(t, []string{"a1", "a2", "x", "c1", "o1", "y"}, read(log.ReadUncommitted, log.ResetEarliest, 8))

	cons, err := log.NewConsumer(kc, log.ConsumerConfig{Topics: []string{"t"}, Isolation: log.ReadCommitted, Reset: log.ResetLatest, MaxWait: time.Millisecond})
	require.NoError(t, err)
	defer cons.Close()
	pos, err := cons.Position("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 6, pos, "latest at read_committed is the LSO")
	_, err = p.AppendMarker(batch.Marker{ProducerID: 3})
	require.NoError(t, err)
	var got []string
	for pos < 9 {
		recs, err := cons.Poll(ctx)
		require.NoError(t, err)
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		pos, err = cons.Position("t", 0)
		require.NoError(t, err)
	}
	require.Equal(t, []string{"y"}, got, "o1 was aborted")
}
