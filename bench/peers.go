package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Durability notes of the peers, printed next to their numbers.
const (
	natsDurability      = "page cache: acked before fsync; NATS fsyncs every 2 min (SyncInterval default)"
	natsSyncDurability  = "fsync before ack (SyncAlways: every message write)"
	kfakeDurability     = "page cache (DataDir, no SyncWrites: fsync only on roll and Close)"
	kfakeSyncDurability = "fsync before ack (SyncWrites: every batch)"
)

// natsServer is a NATS server with JetStream embedded in this process,
// reached through an in-process connection (no socket at all).
type natsServer struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
}

// startNATS starts a JetStream server storing in dir, with a stream of one
// subject, and connects to it in-process.
func startNATS(dir, stream string, syncAlways bool) (*natsServer, error) {
	opts := &server.Options{
		ServerName: "bench",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		DontListen: true, // in-process connections only
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: syncAlways,
		NoLog:      true,
		NoSigs:     true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	srv.Start()
	ns := &natsServer{srv: srv}
	if !srv.ReadyForConnections(10 * time.Second) {
		ns.close()
		return nil, errors.New("nats: server not ready in 10s")
	}
	if ns.nc, err = nats.Connect("", nats.InProcessServer(srv)); err != nil {
		ns.close()
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	if ns.js, err = jetstream.New(ns.nc); err != nil {
		ns.close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = ns.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: stream, Subjects: []string{stream}, Storage: jetstream.FileStorage,
	})
	if err != nil {
		ns.close()
		return nil, fmt.Errorf("nats: create stream: %w", err)
	}
	return ns, nil
}

// close disconnects and shuts the server down, waiting for it.
func (ns *natsServer) close() {
	if ns.nc != nil {
		ns.nc.Close()
	}
	ns.srv.Shutdown()
	ns.srv.WaitForShutdown()
}

// startKfake starts a one-broker kfake cluster on 127.0.0.1 persisting to
// dir (in memory, kfake's default, if dir is ""), with topic seeded (one
// partition).
func startKfake(dir, topic string, syncWrites bool) (*kfake.Cluster, error) {
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, topic)}
	if dir != "" {
		opts = append(opts, kfake.DataDir(dir))
	}
	if syncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kfake: %w", err)
	}
	return c, nil
}

// kgoClient is a kgo client of c; it only ever dials c's 127.0.0.1 address.
func kgoClient(c *kfake.Cluster, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kgo: %w", err)
	}
	return cl, nil
}
