package interop

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
	"github.com/strata-log/strata/log"
)

// The code between the readme markers below is the README's, verbatim (one
// tab of indentation less): TestReadmeSnippets checks that README.md,
// where it has the section, shows exactly this code.

// TestReadmeKafkaClient is the README's "Use it from your Kafka client": an
// application's kgo code tested against Strata through the fixture.
func TestReadmeKafkaClient(t *testing.T) {
	//readme:begin Use it from your Kafka client
	c := kafkatest.New(t, kafkatest.Topic("orders", 3)) // Strata on 127.0.0.1, closed when the test ends
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.ConsumeTopics("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rec := &kgo.Record{Topic: "orders", Key: []byte("order-17"), Value: []byte("paid")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fetches := cl.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	if got := fetches.Records(); len(got) != 1 || string(got[0].Value) != "paid" {
		t.Fatalf("consumed %v", got)
	}

	// The record is in Strata's log, in the partition Kafka's partitioner gives its key.
	p, _ := c.Broker().Partition("orders", log.KeyPartition([]byte("order-17"), 3))
	if recs, err := p.Read(0, 1<<20); err != nil || len(recs) != 1 || string(recs[0].Value) != "paid" {
		t.Fatalf("stored %v, %v", recs, err)
	}
	//readme:end
}

// readmeMoveToKafka is the README's "Move to a Kafka cluster": Strata's own
// Producer and Consumer, unchanged, over a Kafka-protocol Client.
func readmeMoveToKafka(ctx context.Context, seeds []string) ([]log.Record, error) {
	//readme:begin Move to a Kafka cluster
	c, err := kafka.Dial(ctx, kafka.DialConfig{Seeds: seeds}) // Apache Kafka, Redpanda, a Strata server
	if err != nil {
		return nil, err
	}
	defer c.Close()

	// The same Producer and Consumer as over a *log.Broker: c is a log.Client.
	prod, err := log.NewProducer(c, log.ProducerConfig{})
	if err != nil {
		return nil, err
	}
	if _, err := prod.Send(ctx, log.Record{Topic: "orders", Key: []byte("order-17"), Value: []byte("paid")}); err != nil {
		return nil, err
	}
	prod.Close()

	cons, err := log.NewConsumer(c, log.ConsumerConfig{Group: "billing", Topics: []string{"orders"}})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	recs, err := cons.Poll(ctx) // joins the group: Kafka's classic protocol, range assignment
	if err != nil {
		return nil, err
	}
	return recs, cons.Commit(ctx) // the group's committed offsets, as Kafka keeps them
	//readme:end
}

func TestReadmeMoveToKafka(t *testing.T) {
	check := func(t *testing.T, seeds []string) {
		ctx := testCtx(t, 10*time.Second)
		recs, err := readmeMoveToKafka(ctx, seeds)
		if err != nil {
			t.Fatal(err)
		}
		part := log.KeyPartition([]byte("order-17"), 3)
		if len(recs) != 1 || string(recs[0].Key) != "order-17" || string(recs[0].Value) != "paid" || recs[0].Partition != part {
			t.Fatalf("consumed %+v", recs)
		}
		os, err := newKadm(t, seeds[0]).FetchOffsets(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := os.Lookup("orders", int32(part)); !ok || o.At != 1 {
			t.Fatalf("committed %+v", os)
		}
	}
	t.Run("kfake", func(t *testing.T) {
		kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "orders"))
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		check(t, kc.ListenAddrs())
	})
	t.Run("strata", func(t *testing.T) {
		check(t, []string{kafkatest.New(t, kafkatest.Topic("orders", 3)).Addr()})
	})
}

// readmeSnippets returns the code between the readme markers of this file,
// by section, one tab of indentation removed.
func readmeSnippets(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var name string
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		switch trimmed := strings.TrimSpace(line); {
		case strings.HasPrefix(trimmed, "//readme:begin "):
			name = strings.TrimPrefix(trimmed, "//readme:begin ")
			b.Reset()
		case trimmed == "//readme:end":
			out[name] = b.String()
			name = ""
		case name != "":
			b.WriteString(strings.TrimPrefix(line, "\t"))
			b.WriteByte('\n')
		}
	}
	return out
}

// TestReadmeSnippets: a README section named like a snippet shows the
// snippet, verbatim (leading tabs may be four spaces), as its first go
// block.
func TestReadmeSnippets(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets := readmeSnippets(t)
	if len(snippets) != 2 {
		t.Fatalf("%d snippets in readme_test.go, want 2", len(snippets))
	}
	for name, code := range snippets {
		switch block, ok := readmeBlock(readme, name); {
		case !ok:
			t.Logf("README has no section %q with a go block yet", name)
		case normIndent(block) != normIndent(code):
			t.Errorf("README section %q does not show readme_test.go's snippet; it should be:\n%s", name, code)
		}
	}
	// The check itself: a README made of the snippets passes (indented with
	// tabs or with four spaces), and one with a line changed does not.
	section := func(name, code string) []byte {
		return []byte("# Strata\n\n## " + name + "\n\nText.\n\n```go\n" + code + "```\n\n## Next\n\n```go\nx := 1\n```\n")
	}
	for name, code := range snippets {
		if block, ok := readmeBlock(section(name, code), name); !ok || block != code {
			t.Fatalf("section %q not found in a README made of the snippet", name)
		}
		spaced := strings.ReplaceAll(code, "\t", "    ")
		if block, ok := readmeBlock(section(name, spaced), name); !ok || normIndent(block) != normIndent(code) {
			t.Fatalf("section %q indented with spaces does not match", name)
		}
		changed := strings.Replace(code, "\n", "\n// changed\n", 1)
		if block, ok := readmeBlock(section(name, changed), name); !ok || normIndent(block) == normIndent(code) {
			t.Fatalf("section %q: a changed snippet passes", name)
		}
	}
}

// normIndent turns each leading tab of every line into four spaces, as a
// README may indent Go code either way.
func normIndent(code string) string {
	lines := strings.Split(code, "\n")
	for i, l := range lines {
		rest := strings.TrimLeft(l, "\t")
		lines[i] = strings.Repeat("    ", len(l)-len(rest)) + rest
	}
	return strings.Join(lines, "\n")
}

// readmeBlock returns the first go block of the README section headed
// "## name".
func readmeBlock(readme []byte, name string) (string, bool) {
	heading := "## " + name + "\n"
	i := bytes.Index(readme, []byte(heading))
	if i < 0 {
		return "", false
	}
	rest := string(readme[i+len(heading):])
	if next := strings.Index(rest, "\n## "); next >= 0 {
		rest = rest[:next]
	}
	start := strings.Index(rest, "```go\n")
	if start < 0 {
		return "", false
	}
	block := rest[start+len("```go\n"):]
	end := strings.Index(block, "```")
	if end < 0 {
		return "", false
	}
	return block[:end], true
}
