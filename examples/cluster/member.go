package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica"
)

// peerList is the repeatable -peer flag: ID=KAFKA_ADDR,RAFT_ADDR.
type peerList []replica.Peer

func (l *peerList) String() string {
	var s []string
	for _, p := range *l {
		s = append(s, fmt.Sprintf("%d=%s,%s", p.ID, p.Addr, p.RaftAddr))
	}
	return strings.Join(s, " ")
}

func (l *peerList) Set(v string) error {
	id, addrs, ok := strings.Cut(v, "=")
	kafkaAddr, raftAddr, ok2 := strings.Cut(addrs, ",")
	n, err := strconv.Atoi(id)
	if !ok || !ok2 || err != nil || n <= 0 || kafkaAddr == "" || raftAddr == "" {
		return fmt.Errorf("want ID=KAFKA_ADDR,RAFT_ADDR, not %q", v)
	}
	*l = append(*l, replica.Peer{ID: n, Addr: kafkaAddr, RaftAddr: raftAddr})
	return nil
}

// runMember runs one member of a cluster whose other members are other
// processes (started the same way, with the same -peer list), until ctx
// ends: it creates the topic if no member has, produces a numbered record
// with acks=all every 10 ms through its own member (routed to the leader),
// and prints the leader, ISR and its own HW as they change. Stop any
// member (Ctrl-C) and start it again on the same -dir to watch a failover
// and the rejoin. At the end it reads the partition back and checks that
// every record it had acknowledged is there.
func runMember(ctx context.Context, out io.Writer, dir string, id int, peers []replica.Peer) error {
	var self *replica.Peer
	for i := range peers {
		if peers[i].ID == id {
			self = &peers[i]
		}
	}
	if self == nil {
		return fmt.Errorf("-member %d is not in the -peer list", id)
	}
	b, err := replica.Start(replica.Config{
		ID: id, Dir: dir, Addr: self.Addr, RaftAddr: self.RaftAddr, Peers: peers,
		Raft:              controller.LoopbackRaft(),
		HeartbeatInterval: 100 * time.Millisecond,
		SessionTimeout:    time.Second,
		ReplicaLagTime:    5 * time.Second,
		FetchMaxWait:      200 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer b.Close() // controlled shutdown: leadership moves first
	fmt.Fprintf(out, "member %d up: data plane %s, raft %s\n", id, b.Addr(), self.RaftAddr)

	// Create the topic once the cluster has a controller and the brokers
	// for three replicas; another member may have done it already.
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := b.CreateTopic(cctx, topic, log.TopicConfig{Partitions: 1, ReplicationFactor: 3, MinInSyncReplicas: 2})
		cancel()
		if err == nil || errors.Is(err, log.ErrTopicExists) {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if !waitImage(ctx, b, 500*time.Millisecond) { // the next metadata change, or a retry
			return nil
		}
	}

	var acked []string // "member-number": unique in the cluster
	// The member is a log.Client: a Producer on it sends each record to
	// the partition's leader, wherever that is.
	p, err := log.NewProducer(b, log.ProducerConfig{Acks: log.AcksAll, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer p.Close()
	last := ""
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return verifyAcked(out, b, acked)
		case <-tick.C:
		}
		v := fmt.Sprintf("%d-%d", id, i)
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		if _, err := p.Send(pctx, log.Record{Topic: topic, Value: []byte(v)}); err == nil {
			acked = append(acked, v)
		}
		cancel()
		st, ok := b.Image().Partition(topic, 0)
		if !ok {
			continue
		}
		line := fmt.Sprintf("leader %d (epoch %d) ISR %v", st.Leader, st.LeaderEpoch, st.ISR)
		if line != last {
			hw := int64(-1)
			if p, err := b.Partition(topic, 0); err == nil {
				hw = p.HighWatermark()
			}
			fmt.Fprintf(out, "%s; my HW %d; %d records acknowledged\n", line, hw, len(acked))
			last = line
		}
	}
}

// waitImage waits up to d for b's next metadata image; false when ctx
// ended.
func waitImage(ctx context.Context, b *replica.Broker, d time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	b.WaitImage(wctx, b.Image().Version())
	return ctx.Err() == nil
}

// verifyAcked reads this member's own replica of the partition and
// checks that every record this member acknowledged is in it: an acks=all
// record is on every replica of the ISR, and this one was in it.
func verifyAcked(out io.Writer, b *replica.Broker, acked []string) error {
	p, err := b.Partition(topic, 0)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	// Its whole log, not only below its HW: a follower learns the HW from
	// its next fetch, after the leader acknowledged.
	seen := map[string]bool{}
	for next, end := p.StartOffset(), p.EndOffset(); next < end; {
		raw, err := p.ReadBatches(next, 1<<20, end)
		if err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		recs, err := log.DecodeRecords(raw)
		if err != nil {
			return fmt.Errorf("read back: %w", err)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			seen[string(r.Value)] = true
			next = r.Offset + 1
		}
	}
	lost := 0
	for _, v := range acked {
		if !seen[v] {
			lost++
		}
	}
	fmt.Fprintf(out, "%d records acknowledged by this member, %d of them not in its replica\n", len(acked), lost)
	if lost > 0 {
		return errors.New("acknowledged records missing")
	}
	return nil
}
