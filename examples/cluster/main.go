// Command cluster runs three Strata cluster members in one process, on
// loopback TCP: a Raft controller quorum, partitions replicated leader →
// followers over the Kafka protocol, acks=all. While a log.Producer writes
// (acks=all) and a log.Consumer reads, each over a kafka.Client seeded with
// every member as the README shows, it stops the leader of the partition,
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
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
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
	rafts, err := freeAddrs(3)
	if err != nil {
		return err
	}
	for id := 1; id <= 3; id++ {
		c.peers = append(c.peers, replica.Peer{ID: id, Addr: "127.0.0.1:0", RaftAddr: rafts[id-1]})
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
	err = c.any(0).CreateTopic(cctx, topic, log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "topic %q: 1 partition, RF 3, min ISR 2\n", topic)

	wctx, stopWork := context.WithCancel(ctx)
	pctx, stopProducing := context.WithCancel(wctx)
	var wg sync.WaitGroup
	produced := make(chan struct{})
	var acked, consumed []int
	wg.Add(3)
	go func() { defer wg.Done(); defer close(produced); acked = c.produce(pctx) }()
	go func() { defer wg.Done(); consumed = c.consume(wctx) }()
	go func() { defer wg.Done(); c.watch(wctx) }()
	defer func() { stopProducing(); stopWork(); wg.Wait() }()

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
	stopProducing()
	<-produced // every record acknowledged or failed before the consumer drains
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

// freeAddrs returns n distinct loopback addresses whose ports were free a
// moment ago. Every listener stays open until all n are chosen: a port
// closed at once can be handed out again by the next Listen.
func freeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
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

// addrs returns the data-plane addresses of the running members: a
// client's seeds, as Kafka's bootstrap.servers.
func (c *cluster) addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id := 1; id <= 3; id++ {
		if b := c.members[id]; b != nil {
			out = append(out, b.Addr())
		}
	}
	return out
}

// produce writes numbered records with a log.Producer (acks=all) over a
// kafka.Client seeded with every member, as any Kafka client would, and
// returns the numbers acknowledged. The Client follows the leader as it
// moves; a record that fails (its Timeout passed while no leader could
// take it) is not counted.
func (c *cluster) produce(ctx context.Context) []int {
	cl, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: c.addrs()})
	if err != nil {
		fmt.Fprintln(c.out, "producer:", err)
		return nil
	}
	defer cl.Close()
	p, err := log.NewProducer(cl, log.ProducerConfig{Acks: log.AcksAll, Timeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(c.out, "producer:", err)
		return nil
	}
	var mu sync.Mutex
	var acked []int
	for i := 0; ctx.Err() == nil; i++ {
		p.SendAsync(log.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}, func(r log.Record, err error) {
			if err == nil {
				v, _ := strconv.Atoi(string(r.Value))
				mu.Lock()
				acked = append(acked, v)
				mu.Unlock()
			}
		})
		time.Sleep(2 * time.Millisecond) // a steady trickle
	}
	fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	p.Flush(fctx) // the records still in flight: acknowledged or failed
	cancel()
	p.Close()
	mu.Lock()
	defer mu.Unlock()
	return acked
}

// consume reads the topic from the start with a log.Consumer over its own
// kafka.Client until ctx ends, then reads what is left, and returns the
// numbers read.
func (c *cluster) consume(ctx context.Context) []int {
	cl, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: c.addrs()})
	if err != nil {
		fmt.Fprintln(c.out, "consumer:", err)
		return nil
	}
	defer cl.Close()
	cons, err := log.NewConsumer(cl, log.ConsumerConfig{Topics: []string{topic}, Reset: log.ResetEarliest, MaxWait: 100 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(c.out, "consumer:", err)
		return nil
	}
	defer cons.Close()
	var got []int
	poll := func(ctx context.Context) int {
		recs, _ := cons.Poll(ctx) // errors while a leader moves: the next Poll retries
		for _, r := range recs {
			v, _ := strconv.Atoi(string(r.Value))
			got = append(got, v)
		}
		return len(recs)
	}
	for ctx.Err() == nil {
		poll(ctx)
	}
	// Drain: the HW may still be moving past the last acknowledgements.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		dctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		n := poll(dctx)
		cancel()
		if n == 0 {
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
