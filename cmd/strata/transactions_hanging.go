package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
)

// find-hanging (kafka-transactions.sh find-hanging): the transactions open
// in a partition that no coordinator will end. A partition's open
// transaction is a candidate once its producer wrote nothing for longer
// than the largest transaction timeout (transaction.max.timeout.ms); it
// hangs if the coordinator does not know its producer id, has no
// transaction for it that names the partition, or is at an older epoch
// than the partition's (its marker would be refused). Each is ended with
// "abort --start-offset".

// hangingBatch is how many partitions one DescribeProducers asks about
// (Kafka's tool batches by 500 too).
const hangingBatch = 500

// openTxn is a partition's open transaction, as DescribeProducers tells.
type openTxn struct {
	topic     string
	partition int32
	p         kmsg.DescribeProducersResponseTopicPartitionActiveProducer
}

// hangingScope is what find-hanging searches: the partitions of topic (all
// topics if empty; only partition if >= 0), those with a replica on
// broker if >= 0.
type hangingScope struct {
	topic     string
	partition int32
	broker    int32
	maxTxn    time.Duration
}

func txnFindHanging(w io.Writer, a *admin, s hangingScope, now time.Time) error {
	tps, err := hangingPartitions(a, s)
	if err != nil {
		return err
	}
	var open []openTxn
	for len(tps) > 0 {
		batch, rest := takePartitions(tps, hangingBatch)
		got, err := openTxns(a, batch, now, s.maxTxn)
		if err != nil {
			return err
		}
		open = append(open, got...)
		tps = rest
	}
	hanging, err := filterHanging(a, open)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, o := range hanging {
		rows = append(rows, []string{o.topic, strconv.Itoa(int(o.partition)), strconv.FormatInt(o.p.ProducerID, 10),
			strconv.Itoa(int(o.p.ProducerEpoch)), strconv.Itoa(int(o.p.CoordinatorEpoch)),
			strconv.FormatInt(o.p.CurrentTxnStartOffset, 10), strconv.FormatInt(o.p.LastTimestamp, 10),
			strconv.FormatInt(now.Sub(time.UnixMilli(o.p.LastTimestamp)).Milliseconds()/60000, 10)})
	}
	return table(w, "Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)", rows)
}

// hangingPartitions lists the partitions s names, internal topics' too,
// sorted.
func hangingPartitions(a *admin, s hangingScope) ([]kmsg.DescribeProducersRequestTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	if s.topic != "" {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(s.topic)
		req.Topics = []kmsg.MetadataRequestTopic{rt}
	}
	r, err := a.do(req, 7)
	if err != nil {
		return nil, err
	}
	var out []kmsg.DescribeProducersRequestTopic
	for _, t := range r.(*kmsg.MetadataResponse).Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if err := codeError(t.ErrorCode, "Metadata "+name); err != nil {
			return nil, err
		}
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic = name
		for _, p := range t.Partitions {
			if s.partition >= 0 && p.Partition != s.partition || s.broker >= 0 && !slices.Contains(p.Replicas, s.broker) {
				continue
			}
			rt.Partitions = append(rt.Partitions, p.Partition)
		}
		if s.partition >= 0 && len(rt.Partitions) == 0 {
			return nil, fmt.Errorf("%s has no partition %d", name, s.partition)
		}
		if len(rt.Partitions) > 0 {
			slices.Sort(rt.Partitions)
			out = append(out, rt)
		}
	}
	slices.SortFunc(out, func(a, b kmsg.DescribeProducersRequestTopic) int { return strings.Compare(a.Topic, b.Topic) })
	return out, nil
}

// takePartitions splits topics after n partitions.
func takePartitions(topics []kmsg.DescribeProducersRequestTopic, n int) (batch, rest []kmsg.DescribeProducersRequestTopic) {
	for i, t := range topics {
		if len(t.Partitions) >= n {
			head, tail := t, t
			head.Partitions, tail.Partitions = t.Partitions[:n], t.Partitions[n:]
			batch = append(slices.Clone(topics[:i]), head)
			if len(tail.Partitions) > 0 {
				return batch, append([]kmsg.DescribeProducersRequestTopic{tail}, topics[i+1:]...)
			}
			return batch, topics[i+1:]
		}
		n -= len(t.Partitions)
	}
	return topics, nil
}

// openTxns asks DescribeProducers about the partitions of topics and
// returns the transactions open in them whose producer wrote nothing for
// longer than maxTxn.
func openTxns(a *admin, topics []kmsg.DescribeProducersRequestTopic, now time.Time, maxTxn time.Duration) ([]openTxn, error) {
	req := kmsg.NewPtrDescribeProducersRequest()
	req.Topics = topics
	r, err := a.do(req, 0)
	if err != nil {
		return nil, err
	}
	var out []openTxn
	for _, t := range r.(*kmsg.DescribeProducersResponse).Topics {
		for _, p := range t.Partitions {
			if err := codeError(p.ErrorCode, fmt.Sprintf("DescribeProducers %s-%d", t.Topic, p.Partition)); err != nil {
				return nil, err
			}
			for _, ap := range p.ActiveProducers {
				if ap.CurrentTxnStartOffset >= 0 && now.Sub(time.UnixMilli(ap.LastTimestamp)) > maxTxn {
					out = append(out, openTxn{topic: t.Topic, partition: p.Partition, p: ap})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b openTxn) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	return out, nil
}

// filterHanging keeps the open transactions no coordinator will end: their
// producer id has no transactional id (ListTransactions by producer id),
// or the id's transaction (DescribeTransactions) does not name the
// partition, or is at an older epoch than the partition's.
func filterHanging(a *admin, open []openTxn) ([]openTxn, error) {
	if len(open) == 0 {
		return nil, nil
	}
	var pids []int64
	for _, o := range open {
		if !slices.Contains(pids, o.p.ProducerID) {
			pids = append(pids, o.p.ProducerID)
		}
	}
	lreq := kmsg.NewPtrListTransactionsRequest()
	lreq.ProducerIDFilters = pids
	r, err := a.do(lreq, 0)
	if err != nil {
		return nil, err
	}
	lresp := r.(*kmsg.ListTransactionsResponse)
	if err := codeError(lresp.ErrorCode, "ListTransactions"); err != nil {
		return nil, err
	}
	idOf := map[int64]string{}
	var ids []string
	for _, s := range lresp.TransactionStates {
		idOf[s.ProducerID] = s.TransactionalID
		ids = append(ids, s.TransactionalID)
	}
	described := map[string]kmsg.DescribeTransactionsResponseTransactionState{}
	if len(ids) > 0 {
		dreq := kmsg.NewPtrDescribeTransactionsRequest()
		dreq.TransactionalIDs = ids
		r, err := a.do(dreq, 0)
		if err != nil {
			return nil, err
		}
		for _, s := range r.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			if s.ErrorCode == 0 {
				described[s.TransactionalID] = s
				continue
			}
			if err := codeError(s.ErrorCode, "DescribeTransactions "+s.TransactionalID); s.ErrorCode != kerr.TransactionalIDNotFound {
				return nil, err
			}
		}
	}
	var out []openTxn
	for _, o := range open {
		d, ok := described[idOf[o.p.ProducerID]]
		if !ok || d.ProducerID != o.p.ProducerID || int32(d.ProducerEpoch) < o.p.ProducerEpoch || !namesPartition(d, o.topic, o.partition) {
			out = append(out, o)
		}
	}
	return out, nil
}

func namesPartition(d kmsg.DescribeTransactionsResponseTransactionState, topic string, p int32) bool {
	for _, t := range d.Topics {
		if t.Topic == topic && slices.Contains(t.Partitions, p) {
			return true
		}
	}
	return false
}
