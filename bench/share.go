package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/segment/batch"
	"github.com/strata-log/strata/share"
)

// The share case (issue 29): a share group's consumption, 4 consumers
// accepting each record of a topic of 4 partitions, in the process
// (log.ShareConsumer on a Broker) and over the wire (kgo.ShareGroup
// against strata serve and kfake).

const (
	shareRecordSize = 100
	shareConsumers  = 4
	shareTopic      = "share"
	shareGroup      = "bench"
)

func shareRecords(e *env) int     { return e.pick(1_000_000, 200_000, 400) }
func shareWireRecords(e *env) int { return e.pick(200_000, 100_000, 400) }

func shareVariants(e *env) []variant {
	n, nw := shareRecords(e), shareWireRecords(e)
	return []variant{
		{
			label: fmt.Sprintf("share group: %d consumers accepting each %s record, in the process", shareConsumers, sizeName(shareRecordSize)),
			systems: []system{{name: "strata log.ShareConsumer", baseline: true, durability: "acknowledgements in the page cache (__share_group_state; FlushMessages 0 on the topic: no fsync)",
				run: func(e *env) (sample, error) { return shareInProcess(e, n) }}},
		},
		{
			label:   fmt.Sprintf("share group: %d kgo.ShareGroup consumers accepting each %s record, first poll to every record accepted; p50/p99: a consumer's first poll to its first record", shareConsumers, sizeName(shareRecordSize)),
			cpuNote: "record (kgo and server)",
			systems: []system{
				{name: "strata server + kgo", baseline: true, durability: "acknowledgements in the page cache (__share_group_state; FlushMessages 0 on the topic: no fsync)",
					run: func(e *env) (sample, error) { return shareWire(e, shareStrataServer, nw) }},
				{name: "kfake + kgo", durability: kfakeMemDurability,
					run: func(e *env) (sample, error) { return shareWire(e, shareKfakeServer, nw) }},
			},
		},
	}
}

// shareBroker opens a broker with the share topic filled with n records
// and the group reading from its start.
func shareBroker(e *env, n int) (*log.Broker, func(), error) {
	dir, err := e.tempDir("strata-share-")
	if err != nil {
		return nil, nil, err
	}
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	done := func() { b.Close(); os.RemoveAll(dir) }
	fail := func(err error) (*log.Broker, func(), error) { done(); return nil, nil, err }
	t, err := b.CreateTopic(shareTopic, log.TopicConfig{Partitions: shareConsumers})
	if err != nil {
		return fail(err)
	}
	value := payload(shareRecordSize)
	var bd batch.Builder
	for p := range shareConsumers {
		part, err := t.Partition(p)
		if err != nil {
			return fail(err)
		}
		for left := n / shareConsumers; left > 0; {
			k := min(left, 1000)
			now := time.Now().UnixMilli()
			bd.Reset(now)
			for range k {
				bd.Append(now, nil, value, nil)
			}
			if _, _, err := part.AppendBatch(bd.Bytes()); err != nil {
				return fail(err)
			}
			left -= k
		}
	}
	if err := b.ShareCoordinator().SetGroupConfig(shareGroup, share.GroupConfig{AutoOffsetReset: "earliest"}); err != nil {
		return fail(err)
	}
	return b, done, nil
}

// shareInProcess times 4 ShareConsumers accepting every record.
func shareInProcess(e *env, n int) (sample, error) {
	n = n / shareConsumers * shareConsumers
	b, done, err := shareBroker(e, n)
	if err != nil {
		return sample{}, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	var got atomic.Int64
	errs := make([]error, shareConsumers)
	var wg sync.WaitGroup
	sw := startStopwatch()
	for i := range shareConsumers {
		c, err := log.NewShareConsumer(b, log.ShareConsumerConfig{Group: shareGroup, Topics: []string{shareTopic}, MaxRecords: 2000, MaxWait: 10 * time.Millisecond})
		if err != nil {
			return sample{}, err
		}
		wg.Go(func() {
			defer func() {
				if err := c.Close(ctx); err != nil && errs[i] == nil {
					errs[i] = err
				}
			}()
			for got.Load() < int64(n) {
				recs, err := c.Poll(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				for _, r := range recs {
					if err := r.Accept(); err != nil {
						errs[i] = err
						return
					}
				}
				// The acceptances go with the next Poll's fetch (kgo's
				// way too); Close sends the last ones.
				got.Add(int64(len(recs)))
			}
		})
	}
	wg.Wait()
	s := sw.sample(got.Load(), shareRecordSize)
	if err := errors.Join(errs...); err != nil {
		return sample{}, err
	}
	if got.Load() != int64(n) {
		return sample{}, fmt.Errorf("accepted %d records of %d", got.Load(), n)
	}
	return s, nil
}

// shareStrataServer serves a broker of shareBroker's, filled with n
// records by kgo as shareKfakeServer fills kfake: the same batches
// (kgo's defaults, snappy) in both.
func shareStrataServer(e *env, n int) (*kafkaServer, error) {
	b, done, err := shareBroker(e, 0)
	if err != nil {
		return nil, err
	}
	srv, err := kafka.Listen("127.0.0.1:0", b, kafka.Config{})
	if err != nil {
		done()
		return nil, err
	}
	s := &kafkaServer{addr: srv.Addr(), close: func() { srv.Close(); done() }}
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	if err := kgoProduce(ctx, s.addr, shareRecordSize, n, kgo.DefaultProduceTopic(shareTopic)); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// shareKfakeServer is an in-memory kfake cluster with the share topic
// filled with n records (by kgo) and the group reading from its start.
func shareKfakeServer(_ *env, n int) (*kafkaServer, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(shareConsumers, shareTopic))
	if err != nil {
		return nil, fmt.Errorf("kfake: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	addr := c.ListenAddrs()[0]
	if err := kgoProduce(ctx, addr, shareRecordSize, n, kgo.DefaultProduceTopic(shareTopic)); err != nil {
		c.Close()
		return nil, err
	}
	if err := shareEarliest(ctx, addr); err != nil {
		c.Close()
		return nil, err
	}
	return &kafkaServer{addr: addr, close: c.Close}, nil
}

// shareEarliest sets share.auto.offset.reset=earliest on the group.
func shareEarliest(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: shareGroup,
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("earliest")}}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
}

// shareWire times 4 kgo share-group consumers from their first poll
// (the clients are made just before: joining the group is timed) until
// every record is accepted, their last acknowledgements included
// (FlushAcks); closing them is not timed. The sample's P50 and P99 are of
// the consumers' waits from their first poll to their first record.
func shareWire(e *env, start func(*env, int) (*kafkaServer, error), n int) (sample, error) {
	s, err := start(e, n)
	if err != nil {
		return sample{}, err
	}
	defer s.close()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	var got atomic.Int64
	errs := make([]error, shareConsumers)
	firsts := make([]time.Duration, shareConsumers)
	clients := make([]*kgo.Client, 0, shareConsumers)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	var wg sync.WaitGroup
	sw := startStopwatch()
	for i := range shareConsumers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.addr), kgo.ConsumeTopics(shareTopic), kgo.ShareGroup(shareGroup))
		if err != nil {
			return sample{}, err
		}
		clients = append(clients, cl)
		wg.Go(func() {
			for got.Load() < int64(n) && ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
				f := cl.PollFetches(pctx)
				pcancel()
				k := 0
				f.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept); k++ })
				if k > 0 && firsts[i] == 0 {
					firsts[i] = time.Since(sw.start)
				}
				got.Add(int64(k))
			}
			if err := cl.FlushAcks(ctx); err != nil && ctx.Err() == nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	smp := sw.sample(got.Load(), shareRecordSize)
	if err := errors.Join(errs...); err != nil {
		return sample{}, err
	}
	if got.Load() < int64(n) {
		return sample{}, fmt.Errorf("accepted %d records of %d", got.Load(), n)
	}
	smp.P50, smp.P99 = percentiles(slices.DeleteFunc(firsts, func(d time.Duration) bool { return d == 0 })) // 0: a consumer that got none
	return smp, nil
}
