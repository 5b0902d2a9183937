// Command quickstart opens a Strata data directory, creates a topic, appends
// a few records and reads them back. Run it twice: the records of the first
// run are still there.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/strata-log/strata/log"
)

func main() {
	dir := flag.String("dir", "./strata-data", "data directory")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	b, err := log.Open(dir, log.Config{})
	if err != nil {
		return err
	}
	defer b.Close()

	t, err := b.Topic("greetings")
	if errors.Is(err, log.ErrUnknownTopic) {
		t, err = b.CreateTopic("greetings", log.TopicConfig{Partitions: 1})
		fmt.Printf("created topic %q in %s\n", t.Name(), dir)
	}
	if err != nil {
		return err
	}
	p, err := t.Partition(0)
	if err != nil {
		return err
	}
	start := p.EndOffset()
	base, err := p.Append(
		log.Record{Key: []byte("alice"), Value: []byte("hello")},
		log.Record{Key: []byte("bob"), Value: []byte("hi there")},
		log.Record{Key: []byte("carol"), Value: []byte("good " + time.Now().Format("Monday"))},
	)
	if err != nil {
		return err
	}
	fmt.Printf("appended 3 records at offsets %d..%d\n", base, p.EndOffset()-1)
	recs, err := p.Read(p.StartOffset(), 1<<20)
	if err != nil {
		return err
	}
	fmt.Printf("the log holds %d records (%d from earlier runs):\n", len(recs), start-p.StartOffset())
	for _, r := range recs[max(0, len(recs)-6):] {
		fmt.Printf("  offset %3d  %-6s %s\n", r.Offset, r.Key, r.Value)
	}
	return nil
}
