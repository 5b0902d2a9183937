package controller_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/strata-log/strata/controller"
)

// A single-member controller: a broker registers, heartbeats (which
// unfences it) and a topic is created.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "controller-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	c, err := controller.Start(controller.Config{
		NodeID:   1,
		Dir:      dir,
		RaftAddr: "127.0.0.1:0",
		Raft:     controller.LoopbackRaft(),
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	epoch, err := c.RegisterBroker(ctx, controller.BrokerRegistration{ID: 1, Addr: "127.0.0.1:9092"})
	if err != nil {
		panic(err)
	}
	hb, err := c.Heartbeat(ctx, controller.HeartbeatRequest{BrokerID: 1, BrokerEpoch: epoch})
	if err != nil {
		panic(err)
	}
	topic, err := c.CreateTopic(ctx, "orders", controller.TopicSpec{Partitions: 2})
	if err != nil {
		panic(err)
	}
	id, _, _ := c.Leader()
	fmt.Println("active controller:", id, "broker fenced:", hb.Fenced)
	for _, p := range topic.Partitions {
		fmt.Printf("orders-%d leader %d isr %v epoch %d\n", p.Partition, p.Leader, p.ISR, p.LeaderEpoch)
	}
	// Output:
	// active controller: 1 broker fenced: false
	// orders-0 leader 1 isr [1] epoch 0
	// orders-1 leader 1 isr [1] epoch 0
}

// Watching the metadata: Wait returns each newer version as it is applied.
func ExampleController_Wait() {
	dir, err := os.MkdirTemp("", "controller-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	c, err := controller.Start(controller.Config{NodeID: 1, Dir: dir, RaftAddr: "127.0.0.1:0", Raft: controller.LoopbackRaft()})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	done := make(chan error, 1)
	go func() {
		_, err := c.RegisterBroker(ctx, controller.BrokerRegistration{ID: 7, Addr: "127.0.0.1:9092"})
		done <- err
	}()

	img := c.Image()
	for len(img.Brokers()) == 0 {
		if img, err = c.Wait(ctx, img.Version()); err != nil {
			panic(err)
		}
	}
	if err := <-done; err != nil {
		panic(err)
	}
	b := img.Brokers()[0]
	fmt.Println("broker", b.ID, "at", b.Addr, "fenced:", b.Fenced)
	// Output:
	// broker 7 at 127.0.0.1:9092 fenced: true
}
