package kafka

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log/logtest"
)

// What a JoinGroup's protocol metadata costs the server, over a broker on
// disk (its coordinator writes the group's metadata record to
// __consumer_offsets): the request's frame, the member's one copy and the
// leader's response, which carries the metadata back (3.1x allocated,
// before 4.2x: a second copy for the response); at the leader's SyncGroup
// the group's metadata record and the batch that carries it (2x, before
// 3x: a copy of the metadata, and a value and a batch regrown as they
// were encoded); the member's copy is what stays (1x). The requests are
// encoded, and the responses read, outside the measured span.
//
//	go test -run TestJoinGroupMemory -v ./kafka/
func TestJoinGroupMemory(t *testing.T) {
	// Just under 512 KiB: the frame is read into a buffer of the next power
	// of two from 64 KiB (the server's frame pool), here 512 KiB; and the
	// group's metadata record fits __consumer_offsets' max.message.bytes.
	const size = 1<<19 - 256
	b := logtest.New(t, logtest.Topic("t", 1))
	s, err := Listen("127.0.0.1:0", b, Config{})
	require.NoError(t, err)
	defer s.Close()
	nc, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer nc.Close()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))
	buf := make([]byte, 2*size)
	roundTrip := func(raw []byte) []byte {
		t.Helper()
		_, err := nc.Write(raw)
		require.NoError(t, err)
		_, err = io.ReadFull(nc, buf[:4])
		require.NoError(t, err)
		n := binary.BigEndian.Uint32(buf)
		_, err = io.ReadFull(nc, buf[:n])
		require.NoError(t, err)
		return buf[4:n] // the body, after the correlation id
	}
	var m runtime.MemStats
	total := func() uint64 {
		runtime.ReadMemStats(&m)
		return m.TotalAlloc
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for i := range 3 {
		g := fmt.Sprint("g", i)
		req := kmsg.NewPtrJoinGroupRequest()
		req.SetVersion(3) // no KIP-394 round trip
		req.Group, req.ProtocolType = g, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", make([]byte, size)
		req.Protocols = append(req.Protocols, p)
		join := f.AppendRequest(nil, req, int32(2*i+1))
		req, p.Metadata = nil, nil

		before := heap()
		a0 := total()
		out := roundTrip(join)
		a1 := total()
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.SetVersion(3)
		require.NoError(t, resp.ReadFrom(out))
		require.Zero(t, resp.ErrorCode)
		require.Len(t, resp.Members, 1)
		require.Len(t, resp.Members[0].ProtocolMetadata, size)
		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.SetVersion(3)
		sreq.Group, sreq.MemberID, sreq.Generation = g, resp.MemberID, resp.Generation
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = resp.MemberID, []byte{0, 1}
		sreq.GroupAssignment = append(sreq.GroupAssignment, a)
		sync := f.AppendRequest(nil, sreq, int32(2*i+2))
		resp = nil

		a2 := total()
		sresp := kmsg.NewPtrSyncGroupResponse()
		sresp.SetVersion(3)
		require.NoError(t, sresp.ReadFrom(roundTrip(sync)))
		a3 := total()
		require.Zero(t, sresp.ErrorCode)
		join, sync = nil, nil
		kept := float64(int64(heap())-int64(before)) / size
		jx, sx := float64(a1-a0)/size, float64(a3-a2)/size
		t.Logf("JoinGroup with %d KiB of metadata: JoinGroup allocates %.2fx, SyncGroup %.2fx, the server keeps %.2fx", size>>10, jx, sx, kept)
		require.Less(t, jx, 3.5, "JoinGroup: frame, the member's copy, the response")
		require.Less(t, sx, 2.5, "SyncGroup: the group's metadata record and its batch")
		require.Less(t, kept, 1.5, "kept: the member's copy")
	}
}
