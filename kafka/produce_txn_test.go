package kafka

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
)

// A client that sends transactional records without a transactional id
// (the coordinator is not served, so nothing would ever end the
// transaction) is refused as Kafka refuses it,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and nothing is appended; the same
// batch without the transactional bit is appended.
func TestProduceTransactionalRecordsRefused(t *testing.T) {
	b := logtest.New(t, logtest.Topic("t", 1))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	defer s.Close()
	nc, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer nc.Close()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("txn"))

	produce := func(corr int32, transactional bool) int16 {
		var bd batch.Builder
		ts := time.Now().UnixMilli()
		bd.Reset(ts)
		bd.SetProducer(1000, 0, 0)
		bd.Append(ts, nil, []byte("v"), nil)
		recs := append([]byte(nil), bd.Bytes()...)
		if transactional {
			attrs := binary.BigEndian.Uint16(recs[21:23]) | 0x10
			binary.BigEndian.PutUint16(recs[21:23], attrs)
			binary.BigEndian.PutUint32(recs[17:21], crc32.Checksum(recs[21:], crc32.MakeTable(crc32.Castagnoli)))
		}
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(7)
		req.Acks, req.TimeoutMillis = 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recs
		rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
		req.Topics = []kmsg.ProduceRequestTopic{rt}
		_, err := nc.Write(f.AppendRequest(nil, req, corr))
		require.NoError(t, err)
		var size [4]byte
		_, err = io.ReadFull(nc, size[:])
		require.NoError(t, err)
		raw := make([]byte, binary.BigEndian.Uint32(size[:]))
		_, err = io.ReadFull(nc, raw)
		require.NoError(t, err)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		require.NoError(t, resp.ReadFrom(raw[4:])) // after the correlation id
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	end := func() int64 {
		o, err := b.ListOffset(context.Background(), log.TopicPartition{Topic: "t"}, log.LatestOffset)
		require.NoError(t, err)
		return o
	}

	require.Equal(t, errTransactionalIDAuthorizationFailed, produce(1, true))
	require.Equal(t, int64(0), end(), "a refused transactional produce appended")
	require.Equal(t, errNone, produce(2, false))
	require.Equal(t, int64(1), end())
}
