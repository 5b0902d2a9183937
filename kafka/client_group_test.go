package kafka

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// polling runs a consumer's Poll (and Commit after each) in a goroutine
// until stop, collecting what it reads.
type polling struct {
	c      *log.Consumer
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	recs []log.Record
	err  error
}

func startPolling(t *testing.T, c *log.Consumer) *polling {
	ctx, cancel := context.WithCancel(context.Background())
	p := &polling{c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			recs, err := c.Poll(ctx)
			if err == nil {
				err = c.Commit(ctx)
			}
			p.mu.Lock()
			p.recs = append(p.recs, recs...)
			if err != nil && ctx.Err() == nil && !errors.Is(err, log.ErrRebalanceInProgress) &&
				!errors.Is(err, log.ErrIllegalGeneration) && !errors.Is(err, log.ErrUnknownMember) {
				p.err = err
			}
			p.mu.Unlock()
		}
	}()
	t.Cleanup(p.stop)
	return p
}

func (p *polling) stop() {
	p.cancel()
	<-p.done
}

func (p *polling) read() ([]log.Record, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]log.Record(nil), p.recs...), p.err
}

func groupConsumer(t *testing.T, cl log.Client, id string) *log.Consumer {
	t.Helper()
	c, err := log.NewConsumer(cl, log.ConsumerConfig{
		Group: "g", Topics: []string{"t"}, ClientID: id, Reset: log.ResetEarliest,
		MaxWait: 20 * time.Millisecond, SessionTimeout: 6 * time.Second, HeartbeatInterval: 20 * time.Millisecond,
	})
	require.NoError(t, err)
	return c
}

func appendValues(t *testing.T, b *log.Broker, partitions, n int, prefix string) {
	t.Helper()
	tp, err := b.Topic("t")
	require.NoError(t, err)
	for p := range partitions {
		part, err := tp.Partition(p)
		require.NoError(t, err)
		for i := range n {
			_, err := part.Append(log.Record{Value: fmt.Appendf(nil, "%s-%d-%d", prefix, p, i)})
			require.NoError(t, err)
		}
	}
}

// TestClientConsumerGroup: two Strata consumers in one group over one
// Client (so over one shared connection, with joins on their own) split
// the partitions and read every record once; their commits, made through
// OffsetCommit, survive a restart: a consumer of a new Client starts after
// them.
func TestClientConsumerGroup(t *testing.T) {
	leaktest.Check(t)
	const parts = 4
	s, b, _ := start(t, Config{}, logtest.Topic("t", parts))
	appendValues(t, b, parts, 10, "a")
	ctx := context.Background()
	cl, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer cl.Close()

	c1, c2 := groupConsumer(t, cl, "c1"), groupConsumer(t, cl, "c2")
	p1 := startPolling(t, c1)
	p2 := startPolling(t, c2)
	split := func() bool {
		a1, a2 := c1.Assignment(), c2.Assignment()
		seen := map[log.TopicPartition]bool{}
		for _, tp := range append(a1, a2...) {
			seen[tp] = true
		}
		return len(a1) == parts/2 && len(a2) == parts/2 && len(seen) == parts
	}
	byValue := func() map[string]int {
		out := map[string]int{}
		for _, p := range []*polling{p1, p2} {
			recs, err := p.read()
			require.NoError(t, err)
			for _, r := range recs {
				out[string(r.Value)]++
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return split() && len(byValue()) == parts*10 }, 20*time.Second, 5*time.Millisecond,
		"the two split the partitions and read every record")
	d, ok := b.GroupCoordinator().Describe("g")
	require.True(t, ok)
	require.Equal(t, group.StateStable, d.State)
	require.Len(t, d.Members, 2)

	p1.stop()
	p2.stop()
	for v, n := range byValue() {
		// A record may be read twice only across a rebalance, before
		// its commit; none here is read more than twice.
		require.LessOrEqual(t, n, 2, v)
	}
	require.NoError(t, c1.Commit(ctx))
	require.NoError(t, c2.Commit(ctx))
	require.NoError(t, c1.Close())
	require.NoError(t, c2.Close())
	committed, err := cl.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Len(t, committed, parts)
	for tp, off := range committed {
		require.Equal(t, int64(10), off, "%v", tp)
	}

	// A consumer of another client starts from the commits.
	cl2, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer cl2.Close()
	c3 := groupConsumer(t, cl2, "c3")
	defer c3.Close()
	appendValues(t, b, parts, 1, "b")
	var got []string
	require.Eventually(t, func() bool {
		recs, err := c3.Poll(ctx)
		require.NoError(t, err)
		for _, r := range recs {
			got = append(got, string(r.Value))
			require.Equal(t, int64(10), r.Offset)
		}
		return len(got) >= parts
	}, 20*time.Second, time.Millisecond)
	require.ElementsMatch(t, []string{"b-0-0", "b-1-0", "b-2-0", "b-3-0"}, got)
}

// TestClientGroupCalls checks the Client's group methods one by one
// against the server: errors come back as the coordinator's sentinels.
func TestClientGroupCalls(t *testing.T) {
	leaktest.Check(t)
	s, _ := startGroups(t, logtest.Topic("t", 2))
	ctx := context.Background()
	cl, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer cl.Close()

	// Without Protocols the client assigns (range) and syncs itself.
	j, err := cl.JoinGroup(ctx, group.JoinRequest{Group: "g", Topics: []string{"t"}, SessionTimeout: time.Second})
	require.NoError(t, err)
	require.Equal(t, []log.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}, j.Assignment)
	require.NoError(t, cl.Heartbeat(ctx, "g", j.MemberID, j.Generation))
	require.ErrorIs(t, cl.Heartbeat(ctx, "g", j.MemberID, j.Generation+1), log.ErrIllegalGeneration)
	require.ErrorIs(t, cl.Heartbeat(ctx, "g", "nobody", j.Generation), log.ErrUnknownMember)

	// KIP-394 asked of the caller.
	_, err = cl.JoinGroup(ctx, group.JoinRequest{Group: "h", ProtocolType: "consumer", RequireKnownMemberID: true,
		Protocols: []group.Protocol{{Name: "range", Metadata: nil}}, SessionTimeout: time.Second})
	require.ErrorIs(t, err, log.ErrMemberIDRequired)

	offs := map[log.TopicPartition]int64{{Topic: "t", Partition: 0}: 5, {Topic: "t", Partition: 1}: 7}
	require.NoError(t, cl.CommitOffsets(ctx, "g", j.MemberID, j.Generation, offs))
	require.ErrorIs(t, cl.CommitOffsets(ctx, "g", j.MemberID, j.Generation+3, offs), log.ErrIllegalGeneration)
	got, err := cl.FetchOffsets(ctx, "g", []log.TopicPartition{{Topic: "t", Partition: 1}, {Topic: "t", Partition: 0}, {Topic: "u", Partition: 0}})
	require.NoError(t, err)
	require.Equal(t, offs, got)
	got, err = cl.FetchOffsets(ctx, "g", nil)
	require.NoError(t, err)
	require.Equal(t, offs, got)

	require.NoError(t, cl.LeaveGroup(ctx, "g", j.MemberID))
	require.ErrorIs(t, cl.LeaveGroup(ctx, "g", j.MemberID), log.ErrUnknownMember)
	// Empty now: a simple consumer commits.
	require.NoError(t, cl.CommitOffsets(ctx, "g", "", -1, map[log.TopicPartition]int64{{Topic: "t", Partition: 0}: 9}))
	got, err = cl.FetchOffsets(ctx, "g", []log.TopicPartition{{Topic: "t", Partition: 0}})
	require.NoError(t, err)
	require.Equal(t, map[log.TopicPartition]int64{{Topic: "t", Partition: 0}: 9}, got)
}

// movedCoordinator is a broker that names itself the coordinator of every
// group the first time it is asked, then answers heartbeats
// NOT_COORDINATOR and names next as the coordinator.
type movedCoordinator struct {
	ln   net.Listener
	next *Server
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
	finds int
	nots  int
}

func startMovedCoordinator(t *testing.T, next *Server) *movedCoordinator {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	m := &movedCoordinator{ln: ln, next: next, conns: map[net.Conn]bool{}}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			m.mu.Lock()
			m.conns[nc] = true
			m.mu.Unlock()
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				defer nc.Close()
				m.serve(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		m.mu.Lock()
		for nc := range m.conns {
			nc.Close()
		}
		m.mu.Unlock()
		m.wg.Wait()
	})
	return m
}

func (m *movedCoordinator) serve(nc net.Conn) {
	r := bufio.NewReader(nc)
	for {
		frame, _, err := readFrame(r, nil, 1<<20, nil)
		if err != nil {
			return
		}
		h, body, err := parseHeader(frame)
		if err != nil {
			return
		}
		if body, err = skipHeaderTags(h, body); err != nil {
			return
		}
		req := kmsg.RequestForKey(h.key)
		req.SetVersion(h.version)
		if err := req.ReadFrom(body); err != nil {
			return
		}
		var resp kmsg.Response
		switch req := req.(type) {
		case *kmsg.ApiVersionsRequest:
			resp = m.next.apiVersions(errNone)
		case *kmsg.MetadataRequest:
			resp = req.ResponseKind()
		case *kmsg.FindCoordinatorRequest:
			m.mu.Lock()
			m.finds++
			addr := m.next.Addr()
			if m.finds == 1 {
				addr = m.ln.Addr().String()
			}
			m.mu.Unlock()
			host, port, _ := net.SplitHostPort(addr)
			var p int32
			fmt.Sscan(port, &p)
			fr := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Host, c.Port = req.CoordinatorKeys[0], 1, host, p
			fr.Coordinators = append(fr.Coordinators, c)
			resp = fr
		case *kmsg.HeartbeatRequest:
			m.mu.Lock()
			m.nots++
			m.mu.Unlock()
			hr := req.ResponseKind().(*kmsg.HeartbeatResponse)
			hr.ErrorCode = errNotCoordinator
			resp = hr
		default:
			return
		}
		resp.SetVersion(h.version)
		if _, err := nc.Write(appendResponse(nil, h, resp)); err != nil {
			return
		}
	}
}

// TestClientCoordinatorMoved: a NOT_COORDINATOR answer makes the client
// look the coordinator up again and retry there.
func TestClientCoordinatorMoved(t *testing.T) {
	leaktest.Check(t)
	s, _ := startGroups(t, logtest.Topic("t", 1))
	ctx := context.Background()
	direct, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer direct.Close()
	j, err := direct.JoinGroup(ctx, group.JoinRequest{Group: "g", Topics: []string{"t"}, SessionTimeout: time.Second})
	require.NoError(t, err)

	m := startMovedCoordinator(t, s)
	cl, err := Dial(ctx, DialConfig{Seeds: []string{m.ln.Addr().String()}})
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.Heartbeat(ctx, "g", j.MemberID, j.Generation))
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Equal(t, 2, m.finds, "looked up again")
	require.Equal(t, 1, m.nots)
}

// Commits and produces do not wait behind a fetch parked on the same
// Client: fetches have a connection of their own.
func TestClientCommitNotBehindFetch(t *testing.T) {
	leaktest.Check(t)
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 2))
	be := fetchSignal{Broker: b, fetching: make(chan struct{}, 1)}
	s, err := Listen("127.0.0.1:0", be, Config{})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	cl, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer cl.Close()
	done := make(chan error, 1)
	go func() {
		_, err := cl.Fetch(ctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: log.TopicPartition{Topic: "t"}}}, MaxWait: 5 * time.Second})
		done <- err
	}()
	<-be.fetching // parked at the end of the partition
	start := time.Now()
	for range 10 {
		require.NoError(t, cl.CommitOffsets(ctx, "g", "", -1, map[log.TopicPartition]int64{{Topic: "t"}: 1}))
		_, err := cl.Produce(ctx, log.TopicPartition{Topic: "t", Partition: 1}, records("x"), log.AcksLeader)
		require.NoError(t, err)
	}
	require.Less(t, time.Since(start), 4*time.Second, "not behind the parked fetch")
	select {
	case err := <-done:
		t.Fatalf("the fetch returned early: %v", err)
	default:
	}
	cl.Close() // ends the fetch
	<-done
}
