package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
print.value, line.separator, headers.separator, null.literal).`

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
	format := "%s\\n"
	fs.StringVar(&format, "format", format, "`FMT`: kcat-like output format of each record")
	fs.StringVar(&format, "f", format, "`FMT`: the same as --format (kcat's flag)")
	var props stringList
	fs.Var(&props, "property", "`KEY=VALUE` of kafka-console-consumer.sh's formatter (print.key=true, key.separator=:, ...) instead of --format; repeatable")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q", pos)
	}
	if *topic == "" {
		return usagef("--topic is required")
	}
	starts := 0
	for _, set := range []bool{*fromBeginning, *offset != "", *fromTime != ""} {
		if set {
			starts++
		}
	}
	if starts > 1 {
		return usagef("give one of --from-beginning, --offset and --from-time")
	}
	if *group != "" && (*offset != "" || *fromTime != "" || *partition >= 0) {
		return usagef("--group reads the group's committed offsets: --offset, --from-time and --partition cannot go with it")
	}
	if *maxMessages < 0 {
		return usagef("--max-messages must not be negative")
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
	case *fromBeginning:
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
	if c.broker == nil || *group != "" {
		ctx, stop := interruptible()
		defer stop()
		f := follow{
			topic: *topic, group: *group, parts: parts, at: at, byTime: *fromTime != "",
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
		if done, err := cs.partition(c.broker, p, at, *fromTime != ""); err != nil || done {
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
func (c *consumer) partition(b *log.Broker, p *log.Partition, at int64, byTime bool) (done bool, err error) {
	tp := log.TopicPartition{Topic: p.Topic(), Partition: p.ID()}
	off := at
	if at < 0 || byTime {
		if off, err = b.ListOffset(context.Background(), tp, at); err != nil {
			return false, err
		}
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
	untilEnd     bool          // stop at the end offsets the partitions had at the start
	idle         time.Duration // stop after this long without a record; 0: never
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
	cons, err := log.NewConsumer(cl, log.ConsumerConfig{
		Group: f.group, Topics: []string{f.topic}, Reset: reset,
		MaxWait: 100 * time.Millisecond, ClientID: "strata-consume",
		Logger: logger,
	})
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
	for _, i := range f.parts {
		tp := log.TopicPartition{Topic: f.topic, Partition: i}
		end, err := cl.ListOffset(ctx, tp, log.LatestOffset)
		if err != nil {
			return fmt.Errorf("partition %d: %w", i, err)
		}
		ends[i] = end
		if f.group != "" {
			continue
		}
		off := f.at
		if f.at < 0 || f.byTime {
			if off, err = cl.ListOffset(ctx, tp, f.at); err != nil {
				return fmt.Errorf("partition %d: %w", i, err)
			}
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
