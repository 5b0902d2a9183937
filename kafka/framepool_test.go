package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
)

// bigBatch is a batch of 100 records of about 1 KB, each naming batch i and
// its place in it: 100 KB, a frame the server reads into a recycled buffer.
func bigBatch(i int) ([]byte, []string) {
	vals := make([]string, 100)
	for j := range vals {
		vals[j] = fmt.Sprintf("%03d-%03d-%s", i, j, strings.Repeat(string(rune('a'+i%26)), 1000))
	}
	return records(vals...), vals
}

// TestProduceFramesRecycled: a server over a BatchBorrower (a log.Broker)
// reads large produce requests into buffers recycled from the ones before,
// which it overwrites as it takes them back (poison), and every batch is
// stored as it was sent.
func TestProduceFramesRecycled(t *testing.T) {
	s, b, _ := start(t, Config{}, logtest.Topic("big", 1))
	require.NotNil(t, s.frames, "a log.Broker borrows batches")
	s.frames.poison = true
	c := dial(t, s.Addr())
	var want []string
	for i := range 40 {
		recs, vals := bigBatch(i)
		resp := c.do(produceReq(9, -1, "big", 0, recs)).(*kmsg.ProduceResponse)
		require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
		want = append(want, vals...)
	}
	require.Greater(t, s.frames.reused.Load(), int64(15), "most produce frames after the first come from the pool (under -race sync.Pool drops a quarter of what it is given)")

	p, err := b.Partition("big", 0)
	require.NoError(t, err)
	var got []string
	for r, err := range p.Records(0) {
		require.NoError(t, err)
		got = append(got, string(r.Value))
	}
	require.Equal(t, want, got)
}

// keepingBackend keeps every batch it is given, as an in-memory store
// would, and so is not a BatchBorrower (the embedded interface hides the
// broker's BorrowsBatches).
type keepingBackend struct {
	Backend
	mu   sync.Mutex
	kept [][]byte
}

func (k *keepingBackend) Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (int64, error) {
	k.mu.Lock()
	k.kept = append(k.kept, batch)
	k.mu.Unlock()
	return k.Backend.Produce(ctx, tp, slices.Clone(batch), acks)
}

// TestProduceFramesKeptByBackend: over a Backend that does not borrow, each
// produce request has a buffer of its own, which the backend may keep.
func TestProduceFramesKeptByBackend(t *testing.T) {
	lb := logtest.New(t, logtest.InMemory(), logtest.Topic("big", 1))
	kb := &keepingBackend{Backend: lb}
	s, err := Listen("127.0.0.1:0", kb, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.Nil(t, s.frames)
	c := dial(t, s.Addr())
	var sent [][]byte
	for i := range 10 {
		recs, _ := bigBatch(i)
		sent = append(sent, slices.Clone(recs))
		resp := c.do(produceReq(9, -1, "big", 0, recs)).(*kmsg.ProduceResponse)
		require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode)
	}
	kb.mu.Lock()
	defer kb.mu.Unlock()
	require.Len(t, kb.kept, len(sent))
	for i := range sent {
		require.Equal(t, values(t, sent[i]), values(t, kb.kept[i]), "batch %d, kept by the backend, is intact", i)
	}
}

// TestIsFlexibleAsKmsg: parseHeader's table of flexible versions answers
// as kmsg's requests do, for every key and version (and past them).
func TestIsFlexibleAsKmsg(t *testing.T) {
	for key := int16(-1); key < 300; key++ {
		req := kmsg.RequestForKey(key)
		for v := int16(-1); v < 40; v++ {
			want := false
			if req != nil && v >= 0 {
				req.SetVersion(v)
				want = req.IsFlexible()
			}
			if got := isFlexible(key, v); got != want {
				t.Fatalf("key %d v%d: flexible %v, kmsg says %v", key, v, got, want)
			}
		}
	}
}

// TestParseHeaderReusesClientID: a request naming the client id of the one
// before shares its string; another id gets its own.
func TestParseHeaderReusesClientID(t *testing.T) {
	frame := func(id string) []byte {
		b := []byte{0, 1, 0, 4, 0, 0, 0, 7, 0, byte(len(id))}
		return append(b, id...)
	}
	h1, _, err := parseHeaderReusing(frame("app"), nil)
	if err != nil || h1.clientID == nil || *h1.clientID != "app" {
		t.Fatalf("first: %v %v", h1.clientID, err)
	}
	h2, _, err := parseHeaderReusing(frame("app"), h1.clientID)
	if err != nil || h2.clientID != h1.clientID {
		t.Fatalf("same id: got %p, want %p (%v)", h2.clientID, h1.clientID, err)
	}
	h3, _, err := parseHeaderReusing(frame("other"), h1.clientID)
	if err != nil || h3.clientID == h1.clientID || *h3.clientID != "other" || *h1.clientID != "app" {
		t.Fatalf("other id: %q (first now %q, %v)", *h3.clientID, *h1.clientID, err)
	}
}
