package replica

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/order"
	"github.com/strata-log/strata/log"
)

// The produces of idempotent producers go to a leader on a few pipelined
// connections, each producer and partition always on the same one: a
// request is written as soon as its caller comes (produceOrder lets the
// callers of one producer and partition come in sequence order), and the
// leader's server appends a connection's produces to a partition in the
// order they were sent, each as soon as the one before it is appended, and
// answers in that order. So up to 5 batches of a producer are in flight
// without being reordered on the way, which the pool of connections with
// one request each (do) would do.

// pipeSlots is the number of pipelined connections to each leader: the
// answers of one connection come in order, so a produce waiting for the
// ISR delays the answers behind it, but only those of its connection.
const pipeSlots = 4

type pipeKey struct{ leader, slot int }

// slotOf is the pipelined connection of a producer and partition (FNV-1a
// of the topic, partition and producer id).
func slotOf(k orderKey) int {
	h := fnv.New64a()
	h.Write([]byte(k.tp.Topic))
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(k.pid))
	binary.BigEndian.PutUint64(b[8:], uint64(k.tp.Partition))
	h.Write(b[:])
	return int(h.Sum64() % pipeSlots)
}

// pipeConn is one pipelined connection. Callers write under mu, in turn;
// each then reads its own response once the caller before it has read
// its own (last chains them).
type pipeConn struct {
	t   *kafkaTransport
	key pipeKey
	nc  net.Conn

	mu   sync.Mutex
	corr int32
	buf  []byte
	last chan struct{} // closed once the last request written is answered, or failed

	failed atomic.Bool
	once   sync.Once
}

// fail closes the connection: every call on it ends with an error, and the
// next produce dials a new one.
func (p *pipeConn) fail() {
	p.once.Do(func() {
		p.failed.Store(true)
		p.nc.Close()
		t := p.t
		t.mu.Lock()
		if t.pipes[p.key] == p {
			delete(t.pipes, p.key)
		}
		t.mu.Unlock()
	})
}

// pipe returns the live pipelined connection of k, dialed if there is none.
func (t *kafkaTransport) pipe(ctx context.Context, k pipeKey) (*pipeConn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, log.ErrClosed
	}
	if p := t.pipes[k]; p != nil {
		t.mu.Unlock()
		return p, nil
	}
	t.mu.Unlock()
	nc, err := t.dialBroker(ctx, k.leader)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		nc.Close()
		return nil, log.ErrClosed
	}
	if p := t.pipes[k]; p != nil {
		nc.Close() // another call dialed meanwhile: one connection per key
		return p, nil
	}
	p := &pipeConn{t: t, key: k, nc: nc}
	t.pipes[k] = p
	return p, nil
}

// pipelined sends req to leader on the pipelined connection slot and
// reads its response. Once the request is written, the produce has its
// place (internal/order). A call whose ctx ends fails the connection
// (the calls behind it on it fail too, and are retried).
func (t *kafkaTransport) pipelined(ctx context.Context, leader, slot int, req kmsg.Request) (kmsg.Response, error) {
	p, err := t.pipe(ctx, pipeKey{leader: leader, slot: slot})
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, p.fail)
	defer stop()

	p.mu.Lock()
	if p.failed.Load() {
		p.mu.Unlock()
		return nil, t.pipeErr(ctx, leader, net.ErrClosed)
	}
	p.corr++
	corr := p.corr
	p.buf = t.fmt.AppendRequest(p.buf[:0], req, corr)
	prev, mine := p.last, make(chan struct{})
	p.last = mine
	_, werr := p.nc.Write(p.buf)
	if cap(p.buf) > maxKeptFetchBuffer {
		p.buf = nil
	}
	p.mu.Unlock()
	if werr != nil {
		p.fail()
	} else {
		order.Placed(ctx)
	}
	if prev != nil {
		<-prev // one reader at a time, in request order
	}
	defer close(mine)
	if werr != nil {
		return nil, t.pipeErr(ctx, leader, werr)
	}
	resp, err := readResponse(p.nc, req, corr, nil)
	if err != nil {
		p.fail()
		return nil, t.pipeErr(ctx, leader, err)
	}
	return resp, nil
}

func (t *kafkaTransport) pipeErr(ctx context.Context, leader int, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: broker %d: %w", ErrUnreachable, leader, err)
}
