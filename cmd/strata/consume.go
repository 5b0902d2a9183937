package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
                    positions reached are committed on exit

On a data dir nothing else can append while consume has it open, so consume
exits when it reaches the end of every partition (as kcat -e does), or after
--max-messages records.

Format tokens (--format, -f): ` + formatTokens + `

Or Kafka's formatter: --property print.key=true --property key.separator=:
(also print.timestamp, print.partition, print.offset, print.headers,
print.value, line.separator, headers.separator, null.literal).`

func runConsume(e *env, args []string) (err error) {
	fs := newFlags(e, "consume", "--data-dir DIR --topic T [flags]", consumeHelp)
	var t target
	t.register(fs)
	topic := fs.String("topic", "", "`NAME` of the topic (required)")
	fromBeginning := fs.Bool("from-beginning", false, "start at the log start offset")
	offset := fs.String("offset", "", "`OFFSET` to start at: a number, earliest or latest")
	fromTime := fs.String("from-time", "", "`TS`: start at the first record at or after TS (ms since the epoch, or RFC 3339)")
	partition := fs.Int("partition", -1, "`N`: read only partition N (default: all)")
	group := fs.String("group", "", "`GROUP`: consume as a member of this consumer group and commit its positions")
	maxMessages := fs.Int("max-messages", 0, "`N`: exit after N records (0: at the end of the log)")
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
	b, err := openBroker(e, &t, false)
	if err != nil {
		return err
	}
	defer closeBroker(b, &err)
	top, err := b.Topic(*topic)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(e.stdout, 64<<10)
	defer func() {
		if ferr := w.Flush(); err == nil && ferr != nil {
			err = ferr
		}
	}()
	c := &consumer{w: w, format: out, max: *maxMessages}
	if *group != "" {
		reset := log.ResetLatest
		if *fromBeginning {
			reset = log.ResetEarliest
		}
		return c.group(b, *topic, *group, reset)
	}
	parts := []int{*partition}
	if *partition < 0 {
		parts = parts[:0]
		for i := range top.Partitions() {
			parts = append(parts, i)
		}
	}
	for _, i := range parts {
		p, err := top.Partition(i)
		if err != nil {
			return err
		}
		if done, err := c.partition(b, p, at, *fromTime != ""); err != nil || done {
			return err
		}
	}
	return nil
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
		if off, err = b.ListOffset(tp, at); err != nil {
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

// group consumes as a member of a consumer group until every assigned
// partition is read to the end offset it had when consume started, then
// commits the positions of the records printed.
func (c *consumer) group(b *log.Broker, topic, group string, reset log.OffsetReset) (err error) {
	ctx := context.Background()
	cons, err := log.NewConsumer(b, log.ConsumerConfig{
		Group: group, Topics: []string{topic}, Reset: reset,
		MaxWait: 50 * time.Millisecond, ClientID: "strata-consume",
	})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := cons.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	n, err := b.Partitions(topic)
	if err != nil {
		return err
	}
	ends := map[int]int64{}
	for i := range n {
		p, err := b.Partition(topic, i)
		if err != nil {
			return err
		}
		ends[i] = p.EndOffset()
	}
	for {
		recs, err := cons.Poll(ctx)
		if err != nil {
			return err
		}
		rewound := map[int]bool{}
		for i := range recs {
			if c.full() {
				// Not printed: the group's position goes back to the
				// first such record of each partition.
				if r := &recs[i]; !rewound[r.Partition] {
					rewound[r.Partition] = true
					if err := cons.Seek(r.Topic, r.Partition, r.Offset); err != nil && !errors.Is(err, log.ErrNotAssigned) {
						return err
					}
				}
				continue
			}
			c.format.write(c.w, &recs[i])
			c.n++
		}
		if c.full() || caughtUp(cons, topic, ends) {
			break
		}
	}
	return cons.Commit(ctx)
}

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
