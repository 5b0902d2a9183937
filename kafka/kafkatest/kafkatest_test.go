package kafkatest_test

import (
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadata asks addr for every topic over the Kafka protocol.
func metadata(t *testing.T, addr string) *kmsg.MetadataResponse {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(8) // not flexible: no header tags to skip
	_, err = nc.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1))
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(nc, size[:])
	require.NoError(t, err)
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(nc, b)
	require.NoError(t, err)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	require.NoError(t, resp.ReadFrom(b[4:]))
	return resp
}

func TestFixture(t *testing.T) {
	leaktest.Check(t)
	var addr string
	t.Run("up", func(t *testing.T) {
		c := kafkatest.New(t, kafkatest.Topic("orders", 3), kafkatest.Topic("events", 1),
			kafkatest.Seed("events", log.Record{Value: []byte("x")}))
		addr = c.Addr()
		resp := metadata(t, addr)
		parts := map[string]int{}
		for _, tp := range resp.Topics {
			parts[*tp.Topic] = len(tp.Partitions)
		}
		require.Equal(t, map[string]int{"orders": 3, "events": 1}, parts)
		p, err := c.Broker().Partition("events", 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), p.EndOffset())
	})
	_, err := net.Dial("tcp", addr)
	require.Error(t, err, "closed at the end of the test")
}

// TestGoroutines: until a client connects, the fixture runs one goroutine,
// its accept loop (the broker starts its background work with its first
// record); the cleanups end it.
func TestGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("up", func(t *testing.T) {
		inside := runtime.NumGoroutine()
		kafkatest.New(t, kafkatest.Topic("orders", 3))
		require.LessOrEqual(t, runtime.NumGoroutine(), inside+1)
	})
	leaktest.Wait(t, before)
}
