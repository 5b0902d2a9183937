package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/strata-log/strata/log"
)

const produceHelp = `
Appends one record per line of stdin to a topic, as
kafka-console-producer.sh does. The line (without its newline) is the
value; with --key-separator the text before the first separator is the key
and the rest the value, and a line without the separator is an error.
--header adds a header to every record. Records go to the partition Kafka's
default partitioner picks (murmur2 of the key; sticky for records without
one), or to --partition. Nothing is printed on success; --verbose prints
each record's partition and offset to stderr. The exit code is 1 if any
record failed.`

func runProduce(e *env, args []string) (err error) {
	fs := newFlags(e, "produce", "--bootstrap-server ADDR|--data-dir DIR --topic T [flags] < lines", produceHelp)
	var t target
	t.register(fs)
	topic := fs.String("topic", "", "`NAME` of the topic (required)")
	sep := fs.String("key-separator", "", "`SEP` between key and value on each line; unset: lines are values, keys are null")
	partition := fs.Int("partition", -1, "`N`: send every record to partition N (default: Kafka's partitioner)")
	var headers stringList
	fs.Var(&headers, "header", "`KEY=VALUE` header added to every record; KEY alone is a null value; repeatable")
	acks := fs.String("acks", "all", "`ACKS`: all (or -1), 1 or 0, as Kafka's --request-required-acks")
	fs.StringVar(acks, "request-required-acks", "all", "`ACKS`: the same as --acks (Kafka's flag)")
	verbose := fs.Bool("verbose", false, "print each record's partition and offset to stderr")
	var props stringList
	fs.Var(&props, "property", "`KEY=VALUE` of kafka-console-producer.sh's line reader: parse.key=true, key.separator=SEP (Kafka's default: a tab); repeatable")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments %q: records come from stdin", pos)
	}
	if *topic == "" {
		return usagef("--topic is required")
	}
	if *sep == "" && isFlagSet(fs, "key-separator") {
		return usagef("--key-separator must not be empty")
	}
	if err := applyProducerProperties(props, sep); err != nil {
		return err
	}
	hdrs, err := parseHeaders(headers)
	if err != nil {
		return err
	}
	// Kafka's console producer is idempotent with acks=all (since Kafka
	// 3.0): a batch whose leader died in flight is sent again to the next
	// leader and written once.
	pcfg := log.ProducerConfig{Logger: warnLogger(e)}
	if pcfg.Acks, err = parseAcks(*acks); err != nil {
		return err
	}
	pcfg.Idempotent = pcfg.Acks == log.AcksAll
	if *partition >= 0 {
		pcfg.Partitioner = log.PartitionerManual
	}
	c, err := openClient(e, &t)
	if err != nil {
		return err
	}
	defer c.close(&err)
	if _, err := c.topicPartitions(*topic); err != nil {
		return err
	}
	prod, err := log.NewProducer(c, pcfg)
	if err != nil {
		return err
	}
	var (
		mu       sync.Mutex
		failed   int
		firstErr error
	)
	ctx, stop := interruptible()
	defer stop()
	quit := make(chan struct{})
	defer close(quit)
	lines := readLines(e.stdin, quit)
	lineNo := 0
	var readErr error
read:
	for {
		var l line
		select {
		case <-ctx.Done():
			readErr = errInterrupted
			break read
		case l = <-lines:
		}
		if l.err != nil {
			if l.err != io.EOF {
				readErr = fmt.Errorf("read stdin: %w", l.err)
			}
			break
		}
		text := l.text
		lineNo++
		r := log.Record{Topic: *topic, Partition: max(*partition, 0), Value: text, Headers: hdrs}
		if *sep != "" {
			k, v, ok := bytes.Cut(text, []byte(*sep))
			if !ok {
				readErr = fmt.Errorf("line %d: no key separator %q", lineNo, *sep)
				break
			}
			r.Key, r.Value = k, v
		}
		n := lineNo
		prod.SendAsync(r, func(r log.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if firstErr == nil {
					firstErr = fmt.Errorf("record of line %d: %w", n, err)
				}
				return
			}
			if *verbose {
				fmt.Fprintf(e.stderr, "line %d: partition %d offset %d\n", n, r.Partition, r.Offset)
			}
		})
	}
	if err := prod.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		if failed > 1 {
			return fmt.Errorf("%d records failed; the first: %w", failed, firstErr)
		}
		return firstErr
	}
	return readErr
}

// isFlagSet reports whether the command line set the flag.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// applyProducerProperties applies Kafka's line reader properties: with
// parse.key=true lines are key SEP value, SEP being key.separator (a tab
// unless given, as in Kafka) or --key-separator.
func applyProducerProperties(props []string, sep *string) error {
	parseKey, keySep := false, ""
	for _, kv := range props {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return usagef("--property %q: want KEY=VALUE", kv)
		case k == "parse.key":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return usagef("--property %s: want true or false", kv)
			}
			parseKey = b
		case k == "key.separator":
			if v == "" {
				return usagef("--property key.separator must not be empty")
			}
			keySep = v
		default:
			return usagef("--property %q: unknown (known: parse.key, key.separator)", k)
		}
	}
	switch {
	case parseKey && *sep == "" && keySep == "":
		*sep = "\t"
	case parseKey && *sep == "":
		*sep = keySep
	case parseKey && keySep != "" && keySep != *sep:
		return usagef("--key-separator %q and --property key.separator=%s disagree", *sep, keySep)
	}
	return nil
}

// parseHeaders turns KEY=VALUE flags into record headers.
func parseHeaders(kvs []string) ([]log.Header, error) {
	var hdrs []log.Header
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" {
			return nil, usagef("--header %q: the key is empty", kv)
		}
		h := log.Header{Key: k}
		if ok {
			h.Value = []byte(v)
		}
		hdrs = append(hdrs, h)
	}
	return hdrs, nil
}

func parseAcks(s string) (log.Acks, error) {
	switch s {
	case "all", "-1":
		return log.AcksAll, nil
	case "1":
		return log.AcksLeader, nil
	case "0":
		return log.AcksNone, nil
	}
	return 0, usagef("--acks %q: want all, -1, 1 or 0", s)
}
