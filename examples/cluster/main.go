// Command cluster runs three Strata cluster members in one process, on
// loopback TCP: a Raft controller quorum, partitions replicated leader →
// followers over the Kafka protocol, acks=all. While a producer writes
// (acks=all) and a consumer reads, it stops the leader of the partition,
// lets the others elect a new one, and starts the old leader again, which
// catches up and rejoins the ISR; it prints leaders, ISRs and HWs as they
// change, and at the end checks that every acknowledged record was read.
//
//	go run ./examples/cluster -rounds 3
//
// With -member and -peer it runs one member of a cluster of processes
// instead (see runMember): in three terminals,
//
//	peers="-peer 1=127.0.0.1:9092,127.0.0.1:9192 -peer 2=127.0.0.1:9093,127.0.0.1:9193 -peer 3=127.0.0.1:9094,127.0.0.1:9194"
//	go run ./examples/cluster -member 1 -dir /tmp/m1 $peers
//	go run ./examples/cluster -member 2 -dir /tmp/m2 $peers
//	go run ./examples/cluster -member 3 -dir /tmp/m3 $peers
//
// then stop one with Ctrl-C and start it again.
//
// The members bind 127.0.0.1 only: the Raft and data-plane ports carry no
// authentication and must stay private.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
	"github.com/strata-log/strata/segment/batch"
)

func main() {
	rounds := flag.Int("rounds", 2, "how many times to stop and restart the leader")
	dir := flag.String("dir", "", "data directory (default: a temporary one, removed at the end)")
	member := flag.Int("member", 0, "run only this member of a cluster of processes (needs -peer and -dir)")
	var peers peerList
	flag.Var(&peers, "peer", "ID=KAFKA_ADDR,RAFT_ADDR of each member, itself included; repeatable")
	flag.Parse()
	if *member != 0 {
		if *dir == "" || len(peers) == 0 {
			fmt.Fprintln(os.Stderr, "cluster: -member needs -dir and -peer for every member")
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := runMember(ctx, os.Stdout, *dir, *member, peers)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), os.Stdout, *dir, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

const topic = "events"

type cluster struct {
	out   io.Writer
	peers []replica.Peer
	dir   string

	mu      sync.Mutex
	members map[int]*replica.Broker
}

func run(ctx context.Context, out io.Writer, dir string, rounds int) error {
	out = &lockedWriter{w: out} // the watcher prints beside the rounds
	if dir == "" {
		d, err := os.MkdirTemp("", "strata-cluster-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	c := &cluster{out: out, dir: dir, members: map[int]*replica.Broker{}}
	for id := 1; id <= 3; id++ {
		raft, err := freeAddr()
		if err != nil {
			return err
		}
		c.peers = append(c.peers, replica.Peer{ID: id, Addr: "127.0.0.1:0", RaftAddr: raft})
	}
	defer c.closeAll()
	for id := 1; id <= 3; id++ {
		if err := c.start(id); err != nil {
			return err
		}
	}
	// CreateTopic waits, within its context, for the three members to
	// register, and returns once every member can take the topic's
	// records.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := c.any(0).CreateTopic(cctx, topic, log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "topic %q: 1 partition, RF 3, min ISR 2\n", topic)

	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var acked, consumed []int
	wg.Add(3)
	go func() { defer wg.Done(); acked = c.produce(wctx) }()
	go func() { defer wg.Done(); consumed = c.consume(wctx) }()
	go func() { defer wg.Done(); c.watch(wctx) }()
	defer func() { stopWork(); wg.Wait() }()

	for r := range rounds {
		time.Sleep(500 * time.Millisecond) // let records flow
		old, _ := c.any(0).Leader(topic, 0)
		fmt.Fprintf(out, "round %d: stopping leader %d\n", r+1, old)
		start := time.Now()
		c.stop(old)
		if err := c.waitFor(ctx, func(img *controller.Image) bool {
			st, ok := img.Partition(topic, 0)
			return ok && st.Leader != old && st.Leader != controller.NoLeader
		}); err != nil {
			return err
		}
		nl, _ := c.any(0).Leader(topic, 0)
		fmt.Fprintf(out, "round %d: broker %d leads after %v\n", r+1, nl, time.Since(start).Round(time.Millisecond))
		time.Sleep(300 * time.Millisecond)
		fmt.Fprintf(out, "round %d: restarting %d\n", r+1, old)
		if err := c.start(old); err != nil {
			return err
		}
		if err := c.waitFor(ctx, func(img *controller.Image) bool {
			st, ok := img.Partition(topic, 0)
			return ok && len(st.ISR) == 3
		}); err != nil {
			return err
		}
	}
	time.Sleep(300 * time.Millisecond)
	stopWork()
	wg.Wait()

	// Read what is left, then check.
	seen := map[int]bool{}
	for _, v := range consumed {
		seen[v] = true
	}
	lost := 0
	for _, v := range acked {
		if !seen[v] {
			lost++
		}
	}
	fmt.Fprintf(out, "%d records acknowledged, %d consumed, %d acknowledged but not consumed\n", len(acked), len(consumed), lost)
	if lost > 0 || len(acked) == 0 {
		return errors.New("acknowledged records missing")
	}
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (c *cluster) start(id int) error {
	b, err := replica.Start(replica.Config{
		ID: id, Dir: fmt.Sprintf("%s/member-%d", c.dir, id), Addr: "127.0.0.1:0",
		RaftAddr: c.peers[id-1].RaftAddr, Peers: c.peers,
		Raft:              controller.LoopbackRaft(),
		HeartbeatInterval: 100 * time.Millisecond,
		SessionTimeout:    time.Second,
		ReplicaLagTime:    5 * time.Second,
		FetchMaxWait:      200 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.members[id] = b
	c.mu.Unlock()
	fmt.Fprintf(c.out, "member %d up: data plane %s, raft %s\n", id, b.Addr(), c.peers[id-1].RaftAddr)
	return nil
}

func (c *cluster) stop(id int) {
	c.mu.Lock()
	b := c.members[id]
	delete(c.members, id)
	c.mu.Unlock()
	if b != nil {
		b.Close() // controlled shutdown: leadership moves first
	}
}

func (c *cluster) closeAll() {
	c.mu.Lock()
	ids := make([]int, 0, len(c.members))
	for id := range c.members {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.stop(id)
	}
}

// any returns a running member other than not.
func (c *cluster) any(not int) *replica.Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := 1; id <= 3; id++ {
		if b := c.members[id]; b != nil && id != not {
			return b
		}
	}
	return nil
}

// waitFor waits (10 s at most) until cond holds for a member's metadata.
func (c *cluster) waitFor(ctx context.Context, cond func(*controller.Image) bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b := c.any(0)
	img := b.Image()
	for !cond(img) {
		var err error
		if img, err = b.WaitImage(ctx, img.Version()); err != nil {
			return fmt.Errorf("waiting for the metadata: %w", err)
		}
	}
	return nil
}

// produce writes numbered records with acks=all through a member other
// than the leader (its calls are routed there) and returns the numbers
// acknowledged.
func (c *cluster) produce(ctx context.Context) []int {
	var acked []int
	var bd batch.Builder
	tp := log.TopicPartition{Topic: topic}
	for i := 0; ctx.Err() == nil; i++ {
		leader, _ := c.any(0).Leader(topic, 0)
		b := c.any(leader)
		if b == nil {
			continue
		}
		bd.Reset(0)
		bd.Append(time.Now().UnixMilli(), nil, []byte(strconv.Itoa(i)), nil)
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := b.Produce(pctx, tp, slices.Clone(bd.Bytes()), log.AcksAll)
		cancel()
		if err == nil {
			acked = append(acked, i)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return acked
}

// consume reads the partition from the start through any running member
// until ctx ends, then reads what is left, and returns the numbers read.
func (c *cluster) consume(ctx context.Context) []int {
	var got []int
	next := int64(0)
	tp := log.TopicPartition{Topic: topic}
	read := func(ctx context.Context) bool {
		b := c.any(0)
		if b == nil {
			return false
		}
		resp, err := b.Fetch(ctx, log.FetchRequest{Partitions: []log.FetchPartition{{TopicPartition: tp, Offset: next}}, MaxWait: 100 * time.Millisecond})
		if err != nil {
			return false
		}
		defer resp.Release()
		fp := resp.Partitions[0]
		if fp.Err != nil {
			return false
		}
		raw, err := fp.Records.Bytes()
		if err != nil || len(raw) == 0 {
			return false
		}
		recs, err := log.DecodeRecords(raw)
		if err != nil {
			return false
		}
		for _, r := range recs {
			if r.Offset < next {
				continue
			}
			v, _ := strconv.Atoi(string(r.Value))
			got = append(got, v)
			next = r.Offset + 1
		}
		return true
	}
	for ctx.Err() == nil {
		read(ctx)
	}
	// Drain: the HW may still be moving past the last acknowledgements.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		dctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		ok := read(dctx)
		cancel()
		if !ok {
			break
		}
	}
	return got
}

// watch prints the partition's leader, ISR and every replica's HW when
// they change.
func (c *cluster) watch(ctx context.Context) {
	last := ""
	for ctx.Err() == nil {
		b := c.any(0)
		if b == nil {
			continue
		}
		st, _ := b.Image().Partition(topic, 0)
		line := fmt.Sprintf("leader %d (epoch %d) ISR %v", st.Leader, st.LeaderEpoch, st.ISR)
		hws := ""
		for id := 1; id <= 3; id++ {
			c.mu.Lock()
			m := c.members[id]
			c.mu.Unlock()
			if m == nil {
				hws += fmt.Sprintf(" [%d: down]", id)
				continue
			}
			if p, err := m.Partition(topic, 0); err == nil {
				hws += fmt.Sprintf(" [%d: HW %d end %d]", id, p.HighWatermark(), p.EndOffset())
			}
		}
		if line != last {
			fmt.Fprintf(c.out, "%s%s\n", line, hws)
			last = line
		}
		wctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		b.WaitImage(wctx, b.Image().Version())
		cancel()
	}
}

// lockedWriter serializes the writes of the goroutines that print.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
