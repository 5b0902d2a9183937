package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/kafka"
)

const transactionsHelp = `
Lists, describes and aborts transactions (kafka-transactions.sh; Kafka's
ListTransactions, DescribeTransactions, DescribeProducers and
WriteTxnMarkers, KIP-664):

  strata transactions --bootstrap-server ADDR list [--duration-filter MS] [--transactional-id-pattern RE]
  strata transactions --bootstrap-server ADDR describe --transactional-id ID
  strata transactions --bootstrap-server ADDR describe-producers --topic T --partition N
  strata transactions --bootstrap-server ADDR abort --topic T --partition N --start-offset OFFSET
  strata transactions --bootstrap-server ADDR abort --topic T --partition N \
      --producer-id ID --producer-epoch E --coordinator-epoch C
  strata transactions --bootstrap-server ADDR find-hanging (--topic T [--partition N] | --broker-id ID)
      [--max-transaction-timeout MINUTES]

list prints every transactional id with its producer id and state;
--duration-filter keeps the transactions open longer than MS ms.
describe prints one id's transaction: state, timeout, when it started and
its partitions. describe-producers prints the producers a partition knows
and the first offset of each one's open transaction (-1: none). abort ends
a hanging transaction in one partition, one whose coordinator will never
write its marker (a lost coordinator, a producer of an old client): an
ABORT marker is written by the partition's leader, for the producer whose
open transaction starts at --start-offset (found with DescribeProducers),
or for the producer, epoch and coordinator epoch given. find-hanging lists
the transactions open in the partitions of --topic (or of every topic with
a replica on --broker-id) whose producer wrote nothing for longer than
--max-transaction-timeout (transaction.max.timeout.ms, 15 minutes by
default) and that their coordinator will never end: it knows no
transactional id for the producer, or its transaction does not name the
partition, or is at an older producer epoch. The requests go to
the --bootstrap-server broker, which on strata serve coordinates every
transactional id and leads every partition.`

func runTransactions(e *env, args []string) error {
	fs := newFlags(e, "transactions", "--bootstrap-server ADDR list|describe|describe-producers|abort|find-hanging [flags]", transactionsHelp)
	var t target
	t.register(fs)
	var id, topic, pattern string
	var partition, startOffset, producerID, duration int64
	var producerEpoch, coordinatorEpoch, brokerID, maxTxnMinutes int
	fs.StringVar(&id, "transactional-id", "", "`ID`: with describe, the transactional id")
	fs.StringVar(&topic, "topic", "", "`TOPIC`: with describe-producers and abort")
	fs.Int64Var(&partition, "partition", -1, "`N`: with describe-producers and abort")
	fs.Int64Var(&startOffset, "start-offset", -1, "`OFFSET`: with abort, the first offset of the transaction to abort")
	fs.Int64Var(&producerID, "producer-id", -1, "`ID`: with abort, the producer whose transaction to abort")
	fs.IntVar(&producerEpoch, "producer-epoch", -1, "`EPOCH`: with abort and --producer-id")
	fs.IntVar(&coordinatorEpoch, "coordinator-epoch", -1, "`EPOCH`: with abort and --producer-id")
	fs.Int64Var(&duration, "duration-filter", 0, "`MS`: with list, only transactions open longer than this")
	fs.IntVar(&brokerID, "broker-id", -1, "`ID`: with find-hanging, the partitions with a replica on this broker")
	fs.IntVar(&maxTxnMinutes, "max-transaction-timeout", 15, "`MINUTES`: with find-hanging, the broker's transaction.max.timeout.ms")
	fs.StringVar(&pattern, "transactional-id-pattern", "", "`RE`: with list, only the ids this regular expression matches whole")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give one command: list, describe, describe-producers, abort or find-hanging")
	}
	if t.dataDir != "" || t.bootstrap == "" {
		return usagef("transactions works on a running broker: give --bootstrap-server")
	}
	needPartition := func() error {
		if topic == "" || partition < 0 || partition > 1<<31-1 {
			return usagef("%s needs --topic and --partition", pos[0])
		}
		return nil
	}
	switch pos[0] {
	case "list":
	case "describe":
		if id == "" {
			return usagef("describe needs --transactional-id")
		}
	case "describe-producers":
		if err := needPartition(); err != nil {
			return err
		}
	case "abort":
		if err := needPartition(); err != nil {
			return err
		}
		bySpec := producerID >= 0 || producerEpoch >= 0 || coordinatorEpoch >= 0
		switch {
		case bySpec && startOffset >= 0:
			return usagef("abort takes --start-offset or --producer-id, --producer-epoch and --coordinator-epoch, not both")
		case bySpec && (producerID < 0 || producerEpoch < 0 || producerEpoch > 1<<15-1 || coordinatorEpoch < 0 || coordinatorEpoch > 1<<31-1):
			return usagef("abort by producer needs --producer-id, --producer-epoch and --coordinator-epoch, each at least 0")
		case !bySpec && startOffset < 0:
			return usagef("abort needs --start-offset or --producer-id, --producer-epoch and --coordinator-epoch")
		}
	case "find-hanging":
		switch {
		case topic == "" && brokerID < 0:
			return usagef("find-hanging needs --topic or --broker-id")
		case partition >= 0 && topic == "":
			return usagef("find-hanging --partition needs --topic")
		case partition > 1<<31-1 || brokerID > 1<<31-1:
			return usagef("find-hanging: --partition and --broker-id are 32-bit")
		case maxTxnMinutes <= 0:
			return usagef("find-hanging --max-transaction-timeout must be positive")
		}
	default:
		return usagef("unknown command %q: list, describe, describe-producers, abort or find-hanging", pos[0])
	}
	a, err := dialAdmin(&t)
	if err != nil {
		return err
	}
	defer a.Close()
	switch pos[0] {
	case "list":
		return txnList(e.stdout, a, duration, pattern)
	case "describe":
		return txnDescribe(e.stdout, a, id)
	case "describe-producers":
		return txnDescribeProducers(e.stdout, a, topic, int32(partition))
	case "find-hanging":
		return txnFindHanging(e.stdout, a, hangingScope{topic: topic, partition: int32(partition), broker: int32(brokerID),
			maxTxn: time.Duration(maxTxnMinutes) * time.Minute}, time.Now())
	}
	if startOffset >= 0 {
		p, err := producerAt(a, topic, int32(partition), startOffset)
		if err != nil {
			return err
		}
		producerID, producerEpoch, coordinatorEpoch = p.ProducerID, int(p.ProducerEpoch), max(0, int(p.CoordinatorEpoch))
	}
	return txnAbort(a, topic, int32(partition), producerID, int16(producerEpoch), int32(coordinatorEpoch))
}

// codeError is a response's error code as an error naming it.
func codeError(code int16, what string) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", what, kafka.CodeError(code))
}

func table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// coordinatorOf returns the node that coordinates id.
func coordinatorOf(a *admin, id string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorType = id, 1
	req.CoordinatorKeys = []string{id}
	resp, err := a.do(req, 4)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	if req.Version >= 4 {
		if len(r.Coordinators) != 1 {
			return -1, fmt.Errorf("FindCoordinator: %d coordinators answered for one id", len(r.Coordinators))
		}
		c := r.Coordinators[0]
		return c.NodeID, codeError(c.ErrorCode, "FindCoordinator")
	}
	return r.NodeID, codeError(r.ErrorCode, "FindCoordinator")
}

func txnList(w io.Writer, a *admin, durationMs int64, pattern string) error {
	req := kmsg.NewPtrListTransactionsRequest()
	req.DurationFilterMillis = durationMs
	if pattern != "" {
		req.TransactionalIDPattern = kmsg.StringPtr(pattern)
	}
	max := int16(0)
	switch {
	case pattern != "":
		max = 2
	case durationMs > 0:
		max = 1
	}
	resp, err := a.do(req, 2)
	if err != nil {
		return err
	}
	if req.Version < max {
		return fmt.Errorf("the broker's ListTransactions v%d cannot filter (v%d needed)", req.Version, max)
	}
	r := resp.(*kmsg.ListTransactionsResponse)
	if err := codeError(r.ErrorCode, "ListTransactions"); err != nil {
		return err
	}
	// Every id listed here is the answering broker's.
	node := "-"
	if len(r.TransactionStates) > 0 {
		if n, err := coordinatorOf(a, r.TransactionStates[0].TransactionalID); err == nil {
			node = strconv.Itoa(int(n))
		}
	}
	var rows [][]string
	for _, s := range r.TransactionStates {
		rows = append(rows, []string{s.TransactionalID, node, strconv.FormatInt(s.ProducerID, 10), s.TransactionState})
	}
	return table(w, "TransactionalId\tCoordinator\tProducerId\tTransactionState", rows)
}

func txnDescribe(w io.Writer, a *admin, id string) error {
	node, err := coordinatorOf(a, id)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := a.do(req, 0)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.DescribeTransactionsResponse)
	if len(r.TransactionStates) != 1 {
		return fmt.Errorf("DescribeTransactions: %d states answered for one id", len(r.TransactionStates))
	}
	s := r.TransactionStates[0]
	if err := codeError(s.ErrorCode, "DescribeTransactions "+id); err != nil {
		return err
	}
	start, duration := "None", "None"
	if s.StartTimestamp >= 0 {
		start = strconv.FormatInt(s.StartTimestamp, 10)
		duration = strconv.FormatInt(time.Now().UnixMilli()-s.StartTimestamp, 10)
	}
	var ps []string
	for _, t := range s.Topics {
		for _, p := range t.Partitions {
			ps = append(ps, fmt.Sprintf("%s-%d", t.Topic, p))
		}
	}
	return table(w, "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions",
		[][]string{{strconv.Itoa(int(node)), s.TransactionalID, strconv.FormatInt(s.ProducerID, 10), strconv.Itoa(int(s.ProducerEpoch)),
			s.State, strconv.Itoa(int(s.TimeoutMillis)), start, duration, strings.Join(ps, ",")}})
}

// producers returns the producers partition p of topic knows.
func producers(a *admin, topic string, p int32) ([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, error) {
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{p}
	req.Topics = []kmsg.DescribeProducersRequestTopic{rt}
	resp, err := a.do(req, 0)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.DescribeProducersResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("DescribeProducers: no answer for %s-%d", topic, p)
	}
	rp := r.Topics[0].Partitions[0]
	if err := codeError(rp.ErrorCode, fmt.Sprintf("DescribeProducers %s-%d", topic, p)); err != nil {
		return nil, err
	}
	return rp.ActiveProducers, nil
}

func txnDescribeProducers(w io.Writer, a *admin, topic string, p int32) error {
	ps, err := producers(a, topic, p)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, ap := range ps {
		rows = append(rows, []string{strconv.FormatInt(ap.ProducerID, 10), strconv.Itoa(int(ap.ProducerEpoch)),
			strconv.Itoa(int(ap.CoordinatorEpoch)), strconv.Itoa(int(ap.LastSequence)),
			strconv.FormatInt(ap.LastTimestamp, 10), strconv.FormatInt(ap.CurrentTxnStartOffset, 10)})
	}
	return table(w, "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset", rows)
}

// producerAt returns the producer whose open transaction in the partition
// starts at offset.
func producerAt(a *admin, topic string, p int32, offset int64) (kmsg.DescribeProducersResponseTopicPartitionActiveProducer, error) {
	ps, err := producers(a, topic, p)
	if err != nil {
		return kmsg.DescribeProducersResponseTopicPartitionActiveProducer{}, err
	}
	for _, ap := range ps {
		if ap.CurrentTxnStartOffset == offset {
			return ap, nil
		}
	}
	return kmsg.DescribeProducersResponseTopicPartitionActiveProducer{},
		fmt.Errorf("%s-%d: no open transaction starts at offset %d (see describe-producers)", topic, p, offset)
}

// txnAbort writes an ABORT marker for the producer's transaction in the
// partition (WriteTxnMarkers, as the partition's coordinator would).
func txnAbort(a *admin, topic string, p int32, producerID int64, epoch int16, coordinatorEpoch int32) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = producerID, epoch, false, coordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{p}
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{mt}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m}
	resp, err := a.do(req, 1)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.WriteTxnMarkersResponse)
	if len(r.Markers) != 1 || len(r.Markers[0].Topics) != 1 || len(r.Markers[0].Topics[0].Partitions) != 1 {
		return fmt.Errorf("WriteTxnMarkers: no answer for %s-%d", topic, p)
	}
	return codeError(r.Markers[0].Topics[0].Partitions[0].ErrorCode, fmt.Sprintf("abort the transaction of producer %d in %s-%d", producerID, topic, p))
}
