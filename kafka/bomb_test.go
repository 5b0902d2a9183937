package kafka

import (
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/segment/batch/batchtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceBomb: a Produce of a decompression bomb (a 32 KB zstd batch of
// 1000 MiB of zeros, issue 25) is answered RECORD_TOO_LARGE, whether the
// topic keeps batches as sent or recompresses them, after decompressing no
// more than the broker's limit (log's TestProduceBomb and TestBombPeakRSS
// measure that); nothing is appended, and the connection goes on serving.
func TestProduceBomb(t *testing.T) {
	s, b, _ := start(t, Config{},
		logtest.TopicWithConfig("kept", log.TopicConfig{Partitions: 1}),
		logtest.TopicWithConfig("lz4", log.TopicConfig{Partitions: 1, Compression: log.TopicCompressionLz4}))
	c := dial(t, s.Addr())
	bomb, err := batchtest.Bomb(batch.CompressionZstd, 1000<<20)
	require.NoError(t, err)
	for _, topic := range []string{"kept", "lz4"} {
		resp := c.do(produceReq(9, -1, topic, 0, bomb)).(*kmsg.ProduceResponse)
		require.Equal(t, errMessageTooLarge, resp.Topics[0].Partitions[0].ErrorCode, topic)
		p, err := b.Partition(topic, 0)
		require.NoError(t, err)
		require.Zero(t, p.EndOffset(), topic)
		resp = c.do(produceReq(9, -1, topic, 0, records("after"))).(*kmsg.ProduceResponse)
		require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode, topic)
	}
}
