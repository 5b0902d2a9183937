package group_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/group/grouptest"
)

// The life of one member: join, heartbeat, commit, leave.
func Example() {
	store := grouptest.NewStore(nil) // a broker's appends to __consumer_offsets
	c, err := group.New(group.Config{
		Store: store,
		Partitions: func(topic string) (int, error) {
			if topic == "orders" {
				return 3, nil
			}
			return 0, errors.New("unknown topic")
		},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()

	m, err := c.Join(ctx, group.JoinRequest{Group: "billing", ClientID: "worker", Topics: []string{"orders"}})
	if err != nil {
		panic(err)
	}
	fmt.Println("generation", m.Generation, "members", m.Members, "assignment", m.Assignment)

	// Consume, heartbeating meanwhile; then commit the next offsets to read.
	if err := c.Heartbeat(ctx, "billing", m.MemberID, m.Generation); err != nil {
		panic(err)
	}
	err = c.Commit(ctx, "billing", m.MemberID, m.Generation, map[group.TopicPartition]int64{
		{Topic: "orders", Partition: 0}: 42,
		{Topic: "orders", Partition: 2}: 7,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("committed", c.Committed("billing", []group.TopicPartition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}}))
	fmt.Println("records stored", len(store.Records()))

	if err := c.Leave(ctx, "billing", m.MemberID); err != nil {
		panic(err)
	}
	err = c.Heartbeat(ctx, "billing", m.MemberID, m.Generation)
	fmt.Println("after leaving, unknown member:", errors.Is(err, group.ErrUnknownMember))
	// Output:
	// generation 1 members 1 assignment [orders-0 orders-1 orders-2]
	// committed map[orders-0:42]
	// records stored 2
	// after leaving, unknown member: true
}

// A second member joins: the first learns of the rebalance from its
// heartbeat, commits and rejoins, and the partitions are split between them
// by range.
func Example_rebalance() {
	c, err := group.New(group.Config{
		Partitions: func(string) (int, error) { return 3, nil },
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	join := func(r group.JoinRequest) group.JoinResponse {
		resp, err := c.Join(ctx, r)
		if err != nil {
			panic(err)
		}
		return resp
	}

	ra := group.JoinRequest{Group: "g", ClientID: "a", Topics: []string{"orders"}}
	a := join(ra)
	fmt.Println("a:", a.Generation, a.Assignment)

	bDone := make(chan group.JoinResponse)
	go func() { bDone <- join(group.JoinRequest{Group: "g", ClientID: "b", Topics: []string{"orders"}}) }()

	// a's heartbeat loop, as a consumer runs it.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		err := c.Heartbeat(ctx, "g", a.MemberID, a.Generation)
		if errors.Is(err, group.ErrRebalanceInProgress) {
			// Commit what was processed here, then rejoin.
			ra.MemberID = a.MemberID
			a = join(ra)
			break
		}
	}
	b := <-bDone
	fmt.Println("a:", a.Generation, a.Assignment) // member ids "a-…" sort before "b-…"
	fmt.Println("b:", b.Generation, b.Assignment)
	// Output:
	// a: 1 [orders-0 orders-1 orders-2]
	// a: 2 [orders-0 orders-1]
	// b: 2 [orders-2]
}

func ExampleEncodeOffsetRecord() {
	key, value := group.EncodeOffsetRecord("billing", group.TopicPartition{Topic: "orders", Partition: 2}, 42, time.UnixMilli(1700000000000))
	fmt.Printf("key   %x\n", key)
	fmt.Printf("value %x\n", value)
	g, tp, offset, err := group.DecodeOffsetRecord(key, value)
	fmt.Println(g, tp, offset, err)
	// Output:
	// key   0001000762696c6c696e6700066f726465727300000002
	// value 0003000000000000002affffffff00000000018bcfe56800
	// billing orders-2 42 <nil>
}

// Kafka's classic protocol, as a Kafka client (or a Kafka server's
// handlers) speaks it: a Join with the member's protocols, the leader's
// Sync with the assignment it computed, and a follower's Sync waiting for
// it. The coordinator reads neither metadata nor assignments.
func Example_classicProtocol() {
	c, err := group.New(group.Config{
		Partitions:            func(string) (int, error) { return 3, nil },
		InitialRebalanceDelay: 200 * time.Millisecond, // both members join one generation
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	join := func(client string, protocols ...string) <-chan group.JoinResponse {
		r := group.JoinRequest{Group: "g", ClientID: client, ProtocolType: "consumer"}
		for _, p := range protocols {
			r.Protocols = append(r.Protocols, group.Protocol{Name: p, Metadata: []byte(client + "'s " + p + " subscription")})
		}
		ch := make(chan group.JoinResponse, 1)
		go func() {
			resp, err := c.Join(ctx, r)
			if err != nil {
				panic(err)
			}
			ch <- resp
		}()
		return ch
	}
	chA := join("a", "cooperative-sticky", "range") // kgo's default
	chB := join("b", "range")                       // sarama's
	a, b := <-chA, <-chB
	fmt.Println("protocol:", a.Protocol, "leader is a:", a.Leader == a.MemberID)
	for _, m := range a.MemberMetadata { // the leader's alone
		fmt.Printf("  %s\n", m.Metadata)
	}

	follower := make(chan group.SyncResponse)
	go func() {
		s, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: b.MemberID, Generation: b.Generation})
		if err != nil {
			panic(err)
		}
		follower <- s
	}()
	mine, err := c.Sync(ctx, group.SyncRequest{Group: "g", MemberID: a.MemberID, Generation: a.Generation,
		Assignments: map[string][]byte{a.MemberID: []byte("orders 0 1"), b.MemberID: []byte("orders 2")}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("a: %s\nb: %s\n", mine.Assignment, (<-follower).Assignment)
	// Output:
	// protocol: range leader is a: true
	//   a's range subscription
	//   b's range subscription
	// a: orders 0 1
	// b: orders 2
}
