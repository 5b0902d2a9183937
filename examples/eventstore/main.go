// Command eventstore uses a Strata partition as an event store: events keyed
// by aggregate id (a bank account), the current state rebuilt by replaying
// the log with Partition.Records (no allocation per event), and the state
// "as of" a past moment found with OffsetForTime.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/strata-log/strata/log"
)

// Event is a change to an account.
type Event struct {
	Kind   string `json:"kind"` // "opened", "deposited", "withdrew"
	Amount int    `json:"amount,omitempty"`
}

func main() {
	dir := flag.String("dir", "./strata-eventstore", "data directory")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "eventstore:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		return err
	}
	defer b.Close()
	t, err := b.Topic("accounts")
	if errors.Is(err, log.ErrUnknownTopic) {
		// Events are the source of truth: keep them forever, fsync each.
		t, err = b.CreateTopic("accounts", log.TopicConfig{RetentionTime: -1, FlushMessages: 1})
	}
	if err != nil {
		return err
	}
	p, err := t.Partition(0)
	if err != nil {
		return err
	}

	// Yesterday's history, then today's.
	day := time.Now().Truncate(time.Hour).Add(-24 * time.Hour)
	history := []struct {
		account string
		ev      Event
		at      time.Time
	}{
		{"alice", Event{Kind: "opened"}, day},
		{"alice", Event{Kind: "deposited", Amount: 100}, day.Add(time.Hour)},
		{"bob", Event{Kind: "opened"}, day.Add(2 * time.Hour)},
		{"bob", Event{Kind: "deposited", Amount: 40}, day.Add(3 * time.Hour)},
		{"alice", Event{Kind: "withdrew", Amount: 30}, day.Add(20 * time.Hour)},
		{"bob", Event{Kind: "deposited", Amount: 15}, day.Add(21 * time.Hour)},
	}
	if p.EndOffset() == 0 {
		for _, h := range history {
			v, _ := json.Marshal(h.ev)
			if _, err := p.Append(log.Record{Key: []byte(h.account), Value: v, Timestamp: h.at}); err != nil {
				return err
			}
		}
		fmt.Printf("appended %d events\n", len(history))
	}

	now, err := replay(p, p.StartOffset(), p.EndOffset())
	if err != nil {
		return err
	}
	fmt.Println("balances now:", format(now))

	// What did it look like at noon yesterday? Replay up to the first
	// event at or after that moment.
	noon := day.Add(12 * time.Hour)
	upTo, err := p.OffsetForTime(noon)
	if err != nil {
		return err
	}
	then, err := replay(p, p.StartOffset(), upTo)
	if err != nil {
		return err
	}
	fmt.Printf("balances at %s (events before offset %d): %s\n", noon.Format("Jan 2 15:04"), upTo, format(then))
	return nil
}

// replay folds the events in [from, to) into balances per account. It
// ranges over Partition.Records, which reads the log in large chunks and
// allocates nothing per event: a record's Key and Value are valid only
// until the next iteration, so they are decoded (json.Unmarshal copies what
// it keeps) or copied (string(r.Key)) before it.
func replay(p *log.Partition, from, to int64) (map[string]int, error) {
	balances := map[string]int{}
	for r, err := range p.Records(from) {
		if err != nil {
			return nil, err
		}
		if r.Offset >= to {
			break
		}
		var ev Event
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			return nil, fmt.Errorf("event at offset %d: %w", r.Offset, err)
		}
		switch ev.Kind {
		case "opened":
			balances[string(r.Key)] = 0
		case "deposited":
			balances[string(r.Key)] += ev.Amount
		case "withdrew":
			balances[string(r.Key)] -= ev.Amount
		}
	}
	return balances, nil
}

func format(m map[string]int) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	s := ""
	for _, n := range names {
		s += fmt.Sprintf("%s=%d ", n, m[n])
	}
	return s
}
