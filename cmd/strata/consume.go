package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/log"
)

const consumeHelp = `
Prints the records of a topic to stdout, one per line (the value) or in a
kcat-like --format, as kafka-console-consumer.sh does. Where to start:

  (default)         the end: only records appended from now on
  --from-beginning  the log start offset of each partition
  --offset N        offset N (or earliest, latest) of each partition read
  --from-time TS    the first record at or after TS (ms since the epoch, or RFC 3339)
  --group G         the group's committed offsets (else as above); the
                    positions reached are committed every 5 s and on exit

Over --bootstrap-server consume follows the topic, as Kafka's console
consumer does, until --max-messages records, --timeout-ms without one, the
end offsets of the start with --exit-at-end, or SIGINT/SIGTERM (exit 130,
after committing a group's positions). On a data dir nothing else can
append while consume has it open, so consume exits when it reaches the end
of every partition (as kcat -e does), or after --max-messages records.
A partition whose leader dies is read again from its next leader: consume
logs a warning and goes on.

Format tokens (--format, -f): ` + formatTokens + `

Or Kafka's formatter: --property print.key=true --property key.separator=:
(also print.timestamp, print.partition, print.offset, print.headers,
print.value, line.separator, headers.separator, null.literal).

kcat's flags mean what they mean to kcat: -b, -t, -p, -G GROUP (the topic
may follow: -G GROUP TOPIC), -e, -c N, -K DELIM (key DELIM value),
-o beginning|end|stored|N|-N|s@TS, and -C, which consume needs not:

  strata consume -b localhost:9092 -t orders -o beginning -e

--consumer.config FILE (a Java properties file) and --consumer-property
KEY=VALUE take Kafka consumer properties: group.id, auto.offset.reset,
fetch.*, max.partition.fetch.bytes, session.timeout.ms,
heartbeat.interval.ms, max.poll.interval.ms, bootstrap.servers, client.id
and the TLS and SASL ones; any other is warned of on stderr and ignored, as
Kafka's clients do, and a bad value is an error.`

func runConsume(e *env, args []string) (err error) {
	fs := newFlags(e, "consume", "--bootstrap-server ADDR|--data-dir DIR --topic T [flags]", consumeHelp)
	var t target
	t.register(fs)
	topic := fs.String("topic", "", "`NAME` of the topic (required)")
	fromBeginning := fs.Bool("from-beginning", false, "start at the log start offset")
	offset := fs.String("offset", "", "`OFFSET` to start at: a number, earliest or latest")
	fromTime := fs.String("from-time", "", "`TS`: start at the first record at or after TS (ms since the epoch, or RFC 3339)")
	partition := fs.Int("partition", -1, "`N`: read only partition N (default: all)")
	group := fs.String("group", "", "`GROUP`: consume as a member of this consumer group and commit its positions")
	maxMessages := fs.Int("max-messages", 0, "`N`: exit after N records (0: at the end of the log)")
	exitAtEnd := fs.Bool("exit-at-end", false, "over --bootstrap-server: exit at the end offsets the partitions had at the start (kcat -e); on a data dir it always does")
	timeoutMs := fs.Int("timeout-ms", 0, "`MS`: exit after MS without a record (Kafka's --timeout-ms); 0: never")
	isolation := fs.String("isolation-level", "", "`LEVEL`: read_uncommitted (the default: every record) or read_committed (only committed\ntransactions' records, below the last stable offset), as Kafka's isolation.level")
	format := "%s\\n"
	fs.StringVar(&format, "format", format, "`FMT`: kcat-like output format of each record")
	fs.StringVar(&format, "f", format, "`FMT`: the same as --format (kcat's flag)")
	var props stringList
	fs.Var(&props, "property", "`KEY=VALUE` of kafka-console-consumer.sh's formatter (print.key=true, key.separator=:, ...) instead of --format; repeatable")
	var cprops clientProps
	cprops.register(fs, "consumer", consumerPropertyNames)
	// kcat's flags, with kcat's meanings.
	fs.StringVar(&t.bootstrap, "b", "", "`ADDR`: the same as --bootstrap-server (kcat)")
	fs.StringVar(topic, "t", "", "`NAME`: the same as --topic (kcat)")
	fs.IntVar(partition, "p", -1, "`N`: the same as --partition (kcat)")
	fs.StringVar(group, "G", "", "`GROUP`: the same as --group (kcat -G GROUP TOPIC: the topic may follow as an argument)")
	fs.BoolVar(exitAtEnd, "e", false, "the same as --exit-at-end (kcat)")
	fs.IntVar(maxMessages, "c", 0, "`N`: the same as --max-messages (kcat)")
	kcatOffset := fs.String("o", "", "`OFFSET` to start at (kcat): beginning, end, stored (the group's), N, -N (N before the end)\nor s@TS (the first record at or after TS ms)")
	kcatKey := fs.String("K", "", "`DELIM`: print each record as key DELIM value (kcat; \\t, \\n escapes)")
	fs.Bool("C", false, "consumer mode (kcat): what consume does")
	kcatProduce := fs.Bool("P", false, "producer mode (kcat): an error here, use strata produce")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *kcatProduce {
		return usagef("-P is kcat's producer mode: use strata produce")
	}
	if len(pos) == 1 && *topic == "" && *group != "" {
		*topic = pos[0] // kcat -G GROUP TOPIC
		pos = nil
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q", pos)
	}
	cp, err := cprops.read()
	if err != nil {
		return err
	}
	applyConnection(&t, cp)
	ccfg, reset, err := consumerConfig(&cprops, cp)
	if err != nil {
		return err
	}
	warnUnused(e, "consume", cp, consumerPropertyNames)
	if *isolation != "" {
		if ccfg.Isolation, err = parseIsolation(*isolation); err != nil {
			return usagef("--isolation-level: %v", err)
		}
	}
	if gid := ccfg.Group; gid != "" {
		if *group != "" && *group != gid {
			return usagef("--group %s and group.id=%s disagree", *group, gid)
		}
		*group = gid
	}
	if *topic == "" {
		return usagef("--topic is required")
	}
	back := int64(0) // kcat -o -N
	if *kcatOffset != "" {
		if *offset != "" || *fromTime != "" || *fromBeginning {
			return usagef("give one of -o, --offset, --from-beginning and --from-time")
		}
		var stored bool
		if *offset, *fromTime, back, stored, err = parseKcatOffset(*kcatOffset); err != nil {
			return err
		}
		if stored && *group == "" {
			return usagef("-o stored reads a group's committed offsets: give -G GROUP")
		}
		if *group != "" && (*offset == "earliest" || *offset == "latest") {
			// With a group, kcat's beginning and end say where a partition
			// without a committed offset starts.
			*fromBeginning, *offset = *offset == "earliest", ""
		}
	}
	starts := 0
	for _, set := range []bool{*fromBeginning, *offset != "", *fromTime != "", back > 0} {
		if set {
			starts++
		}
	}
	if starts > 1 {
		return usagef("give one of --from-beginning, --offset and --from-time")
	}
	if *group != "" && (*offset != "" || *fromTime != "" || back > 0 || *partition >= 0) {
		return usagef("--group reads the group's committed offsets: --offset, --from-time and --partition cannot go with it")
	}
	if *maxMessages < 0 {
		return usagef("--max-messages must not be negative")
	}
	if isFlagSet(fs, "K") {
		if isFlagSet(fs, "format") || isFlagSet(fs, "f") || len(props) > 0 {
			return usagef("give -K, --format or --property, not two of them")
		}
		format = "%k" + strings.ReplaceAll(*kcatKey, "%", "%%") + "%s\\n"
	}
	var out recordWriter
	switch {
	case len(props) > 0 && (isFlagSet(fs, "format") || isFlagSet(fs, "f")):
		return usagef("give --format or --property, not both")
	case len(props) > 0:
		pf, err := parseConsumerProperties(props)
		if err != nil {
			return usagef("%v", err)
		}
		out = pf
	default:
		rf, err := parseFormat(format)
		if err != nil {
			return usagef("%v", err)
		}
		out = rf
	}
	var at int64 = log.LatestOffset
	switch {
	case back > 0:
	case *fromBeginning || (starts == 0 && reset == log.ResetEarliest):
		at = log.EarliestOffset
	case *offset != "":
		if at, err = parseOffset(*offset); err != nil {
			return err
		}
	case *fromTime != "":
		if at, err = parseTime(*fromTime); err != nil {
			return err
		}
	}
	if *timeoutMs < 0 {
		return usagef("--timeout-ms must not be negative")
	}
	c, err := openClient(e, &t)
	if err != nil {
		return err
	}
	defer c.close(&err)
	n, err := c.topicPartitions(*topic)
	if err != nil {
		return err
	}
	if *partition >= n {
		return fmt.Errorf("partition %d: topic %s has %d partitions", *partition, *topic, n)
	}
	w := bufio.NewWriterSize(e.stdout, 64<<10)
	defer func() {
		if ferr := w.Flush(); err == nil && ferr != nil {
			err = ferr
		}
	}()
	cs := &consumer{w: w, format: out, max: *maxMessages}
	parts := []int{*partition}
	if *partition < 0 {
		parts = parts[:0]
		for i := range n {
			parts = append(parts, i)
		}
	}
	if c.broker == nil || *group != "" || ccfg.Isolation == log.ReadCommitted {
		// (READ_COMMITTED on a data dir too: the Consumer skips the
		// aborted transactions and stops at the last stable offset.)
		ctx, stop := interruptible()
		defer stop()
		f := follow{
			cfg:   ccfg,
			topic: *topic, group: *group, parts: parts, at: at, byTime: *fromTime != "", back: back,
			// On a data dir nothing else appends: stop at the end.
			untilEnd: *exitAtEnd || c.broker != nil,
			idle:     time.Duration(*timeoutMs) * time.Millisecond,
		}
		return cs.follow(ctx, e, c, f)
	}
	top, err := c.broker.Topic(*topic)
	if err != nil {
		return err
	}
	for _, i := range parts {
		p, err := top.Partition(i)
		if err != nil {
			return err
		}
		if done, err := cs.partition(c.broker, p, at, *fromTime != "", back); err != nil || done {
			return err
		}
	}
	return nil
}

// warnLogger logs warnings and errors to stderr: a client command's
// library lines (a leader that moved or died, retried).
func warnLogger(e *env) *slog.Logger {
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// parseIsolation parses an isolation level as Kafka names it.
func parseIsolation(s string) (log.IsolationLevel, error) {
	switch s {
	case "read_uncommitted":
		return log.ReadUncommitted, nil
	case "read_committed":
		return log.ReadCommitted, nil
	}
	return 0, fmt.Errorf("want read_uncommitted or read_committed (not %q)", s)
}

// parseOffset parses --offset: a non-negative number, earliest or latest.
func parseOffset(s string) (int64, error) {
	switch s {
	case "earliest", "beginning":
		return log.EarliestOffset, nil
	case "latest", "end":
		return log.LatestOffset, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, usagef("--offset %q: want a non-negative offset, earliest or latest", s)
	}
	return n, nil
}

// parseTime parses --from-time: ms since the epoch or RFC 3339.
func parseTime(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, usagef("--from-time %q: want ms since the epoch or an RFC 3339 time (2024-05-01T12:00:00Z)", s)
	}
	return ts.UnixMilli(), nil
}

type consumer struct {
	w      *bufio.Writer
	format recordWriter
	max    int // 0: no limit
	n      int // records printed
}

// full reports whether --max-messages records have been printed.
func (c *consumer) full() bool { return c.max > 0 && c.n >= c.max }

// partition prints p's records from at (an offset, EarliestOffset,
// LatestOffset, or with byTime a timestamp) to its end offset. done says
// --max-messages was reached.
func (c *consumer) partition(b *log.Broker, p *log.Partition, at int64, byTime bool, back int64) (done bool, err error) {
	tp := log.TopicPartition{Topic: p.Topic(), Partition: p.ID()}
	off, err := startOffset(context.Background(), b, tp, at, byTime, back)
	if err != nil {
		return false, err
	}
	end := p.EndOffset()
	if off < p.StartOffset() || off > end {
		return false, fmt.Errorf("partition %d: offset %d is outside the log, [%d, %d]", p.ID(), off, p.StartOffset(), end)
	}
	var recs []log.Record
	maxBytes := 1 << 20
	for off < end {
		if recs, err = p.ReadAppend(recs[:0], off, maxBytes); err != nil {
			if errors.Is(err, log.ErrCorrupt) && maxBytes > 1 {
				// Print the records before the damage: read again one
				// batch at a time, up to the corrupt one.
				maxBytes = 1
				continue
			}
			return false, fmt.Errorf("partition %d at offset %d: %w", p.ID(), off, err)
		}
		if len(recs) == 0 {
			break
		}
		for i := range recs {
			r := &recs[i]
			r.Topic, r.Partition = tp.Topic, tp.Partition
			c.format.write(c.w, r)
			c.n++
			off = r.Offset + 1
			if c.full() {
				return true, nil
			}
		}
	}
	return false, nil
}

// follow says what consumer.follow reads.
type follow struct {
	topic, group string
	parts        []int // the partitions printed (without a group)
	at           int64 // where to start without a group: an offset, EarliestOffset, LatestOffset or a timestamp
	byTime       bool
	back         int64              // > 0: start this many records before the end of each partition (kcat -o -N)
	cfg          log.ConsumerConfig // from the consumer properties
	untilEnd     bool               // stop at the end offsets the partitions had at the start
	idle         time.Duration      // stop after this long without a record; 0: never
}

// follow consumes with a log.Consumer, as a member of f.group or (without
// one) from f.at on each partition, until --max-messages records, the end
// (f.untilEnd), f.idle without records or ctx's end (errInterrupted). A
// group's positions after the records printed are committed before it
// returns.
func (c *consumer) follow(ctx context.Context, e *env, cl log.Client, f follow) (err error) {
	logger := warnLogger(e)
	reset := log.ResetLatest
	if f.at == log.EarliestOffset {
		reset = log.ResetEarliest
	}
	cfg := f.cfg
	cfg.Group, cfg.Topics, cfg.Reset, cfg.Logger = f.group, []string{f.topic}, reset, logger
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 100 * time.Millisecond
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "strata-consume"
	}
	cons, err := log.NewConsumer(cl, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := cons.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	wanted := map[int]bool{}
	for _, i := range f.parts {
		wanted[i] = true
	}
	ends := map[int]int64{}
	endAt := log.LatestOffset
	if f.cfg.Isolation == log.ReadCommitted {
		endAt = log.LatestStableOffset // a READ_COMMITTED reader's end, as Kafka's ListOffsets gives it
	}
	for _, i := range f.parts {
		tp := log.TopicPartition{Topic: f.topic, Partition: i}
		end, err := cl.ListOffset(ctx, tp, endAt)
		if err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
		ends[i] = end
		if f.group != "" {
			continue
		}
		off, err := startOffset(ctx, cl, tp, f.at, f.byTime, f.back)
		if err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
		if err := cons.Seek(f.topic, i, off); err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
	}
	last, committed := time.Now(), time.Now()
	for {
		recs, err := cons.Poll(ctx)
		if ctx.Err() != nil {
			if f.group != "" {
				if err := cons.Commit(context.Background()); err != nil {
					return err
				}
			}
			return errInterrupted
		}
		if err != nil {
			return err
		}
		if len(recs) > 0 {
			last = time.Now()
		}
		rewound := map[int]bool{}
		for i := range recs {
			r := &recs[i]
			if f.group == "" && !wanted[r.Partition] {
				continue
			}
			if c.full() {
				// Not printed: the group's position goes back to the
				// first such record of each partition.
				if !rewound[r.Partition] {
					rewound[r.Partition] = true
					if err := cons.Seek(r.Topic, r.Partition, r.Offset); err != nil && !errors.Is(err, log.ErrNotAssigned) {
						return err
					}
				}
				continue
			}
			c.format.write(c.w, r)
			c.n++
		}
		if err := c.w.Flush(); err != nil {
			return err
		}
		if f.group != "" && time.Since(committed) >= autoCommitInterval {
			// As Kafka's consumer with enable.auto.commit: a member
			// whose group moves (its coordinator died) loses at most
			// this much to a rebalance. A refused commit is not fatal:
			// the next Poll rejoins, and the exit commits again.
			cctx, cancel := context.WithTimeout(ctx, autoCommitInterval)
			if err := cons.Commit(cctx); err != nil && ctx.Err() == nil {
				logger.Warn("consume: commit of the group's positions failed; retried later", "group", f.group, "err", err)
			}
			cancel()
			committed = time.Now()
		}
		if c.full() || (f.untilEnd && caughtUp(cons, f.topic, ends)) || (f.idle > 0 && time.Since(last) >= f.idle) {
			break
		}
	}
	if f.group == "" {
		return nil
	}
	return cons.Commit(ctx)
}

// startOffset resolves where to start reading tp: at (an offset, or
// EarliestOffset or LatestOffset), or with byTime the first record at or
// after the timestamp at, or with back > 0 that many records before the
// end offset (not before the log start).
func startOffset(ctx context.Context, c log.Client, tp log.TopicPartition, at int64, byTime bool, back int64) (int64, error) {
	if back > 0 {
		end, err := c.ListOffset(ctx, tp, log.LatestOffset)
		if err != nil {
			return 0, err
		}
		start, err := c.ListOffset(ctx, tp, log.EarliestOffset)
		if err != nil {
			return 0, err
		}
		return max(start, end-back), nil
	}
	if at < 0 || byTime {
		return c.ListOffset(ctx, tp, at)
	}
	return at, nil
}

// parseKcatOffset parses kcat's -o: beginning, end, stored, N, -N or s@TS,
// into --offset or --from-time's value, a count back from the end, or
// stored (the group's committed offsets: consume --group's start).
func parseKcatOffset(s string) (offset, fromTime string, back int64, stored bool, err error) {
	switch s {
	case "beginning":
		return "earliest", "", 0, false, nil
	case "end":
		return "latest", "", 0, false, nil
	case "stored":
		return "", "", 0, true, nil
	}
	if ts, ok := strings.CutPrefix(s, "s@"); ok {
		if n, err := strconv.ParseInt(ts, 10, 64); err != nil || n < 0 {
			return "", "", 0, false, usagef("-o %s: want s@ a timestamp in ms", s)
		}
		return "", ts, 0, false, nil
	}
	n, perr := strconv.ParseInt(s, 10, 64)
	switch {
	case perr != nil:
		return "", "", 0, false, usagef("-o %q: want beginning, end, stored, an offset, -N (N before the end) or s@TS", s)
	case n < 0:
		return "", "", -n, false, nil
	}
	return s, "", 0, false, nil
}

// consumerPropertyNames are the consumer properties consume maps to
// log.ConsumerConfig.
var consumerPropertyNames = []string{"group.id", "auto.offset.reset", "fetch.min.bytes", "fetch.max.wait.ms", "fetch.max.bytes",
	"max.partition.fetch.bytes", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "isolation.level"}

// consumerConfig maps the consumer properties it knows to a
// log.ConsumerConfig (group.id in its Group) and auto.offset.reset, and
// deletes them from props, leaving those it does not use.
func consumerConfig(p *clientProps, props map[string]string) (cfg log.ConsumerConfig, reset log.OffsetReset, err error) {
	reset = log.ResetLatest
	for _, k := range []string{"key.deserializer", "value.deserializer"} {
		delete(props, k) // the console consumer's own: consume reads bytes
	}
	for k, v := range props {
		if !slices.Contains(consumerPropertyNames, k) {
			continue
		}
		delete(props, k)
		switch k {
		case "group.id":
			cfg.Group = v
			continue
		case "auto.offset.reset":
			switch v {
			case "earliest":
				reset = log.ResetEarliest
			case "latest":
			default:
				return cfg, reset, usagef("%s: want earliest or latest", p.source(k))
			}
			continue
		case "isolation.level":
			if cfg.Isolation, err = parseIsolation(v); err != nil {
				return cfg, reset, usagef("%s: %v", p.source(k), err)
			}
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return cfg, reset, usagef("%s: want a positive number", p.source(k))
		}
		ms := time.Duration(n) * time.Millisecond
		switch k {
		case "fetch.min.bytes":
			cfg.MinBytes = n
		case "fetch.max.wait.ms":
			cfg.MaxWait = ms
		case "fetch.max.bytes":
			cfg.MaxBytes = n
		case "max.partition.fetch.bytes":
			cfg.PartitionMaxBytes = n
		case "session.timeout.ms":
			cfg.SessionTimeout = ms
		case "heartbeat.interval.ms":
			cfg.HeartbeatInterval = ms
		case "max.poll.interval.ms":
			cfg.RebalanceTimeout = ms // Kafka's rebalance timeout is max.poll.interval.ms
		}
	}
	return cfg, reset, nil
}

// autoCommitInterval is how often consume --group commits its positions:
// Kafka's auto.commit.interval.ms.
const autoCommitInterval = 5 * time.Second

// caughtUp reports whether every assigned partition's position has reached
// its end offset.
func caughtUp(cons *log.Consumer, topic string, ends map[int]int64) bool {
	as := cons.Assignment()
	if len(as) == 0 {
		return false
	}
	for _, tp := range as {
		pos, err := cons.Position(topic, tp.Partition)
		if err != nil || pos < ends[tp.Partition] {
			return false
		}
	}
	return true
}
