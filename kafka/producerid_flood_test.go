package kafka

import (
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
)

// A client producing with a made-up producer id per request (sequence 0,
// which an unknown producer may start at) costs the partition a bounded
// state: log.DefaultMaxProducers producers at most, about 100 B each; the
// server's heap grows by less than that bound however many ids come.
//
//	go test -run TestProducerIDFlood -v ./kafka/
func TestProducerIDFlood(t *testing.T) {
	b := logtest.New(t, logtest.Topic("t", 1))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	defer s.Close()
	nc, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer nc.Close()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("flood"))
	const ids = 3 * log.DefaultMaxProducers
	var bd batch.Builder
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rt.Partitions = []kmsg.ProduceRequestTopicPartition{kmsg.NewProduceRequestTopicPartition()}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	var frame, resp []byte
	produce := func(pid int64) {
		ts := time.Now().UnixMilli()
		bd.Reset(ts)
		bd.SetProducer(pid, 0, 0)
		bd.Append(ts, nil, []byte("v"), nil)
		req.Topics[0].Partitions[0].Records = bd.Bytes()
		frame = f.AppendRequest(frame[:0], req, int32(pid))
		_, err := nc.Write(frame)
		require.NoError(t, err)
		var size [4]byte
		_, err = io.ReadFull(nc, size[:])
		require.NoError(t, err)
		resp = append(resp[:0], make([]byte, binary.BigEndian.Uint32(size[:]))...)
		_, err = io.ReadFull(nc, resp)
		require.NoError(t, err)
	}
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	for pid := range int64(1000) { // warm up: connection, segment, index
		produce(pid)
	}
	before := heap()
	for pid := range int64(ids) {
		produce(1000 + pid)
	}
	grown := heap() - before
	p, err := b.Partition("t", 0)
	require.NoError(t, err)
	kept := len(p.ProducerLastOffsets())
	t.Logf("%d made-up producer ids: %d kept, heap +%d KiB (%.0f B per id sent)", ids, kept, grown>>10, float64(grown)/ids)
	require.LessOrEqual(t, kept, log.DefaultMaxProducers)
	require.Less(t, grown, int64(150*log.DefaultMaxProducers))
}
