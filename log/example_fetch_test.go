package log_test

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"github.com/strata-log/strata/log"
)

// A server answers a fetch with the records' bytes straight from the
// segment files: WriteTo uses sendfile when the writer is a TCP or Unix
// socket (here a buffer, so it copies), and Release lets the segments go.
func ExampleBroker_Fetch() {
	dir, _ := os.MkdirTemp("", "strata-example")
	defer os.RemoveAll(dir)
	b, _ := log.Open(dir, log.Config{})
	defer b.Close()
	t, _ := b.CreateTopic("events", log.TopicConfig{})
	p, _ := t.Partition(0)
	p.Append(log.Record{Value: []byte("one")}, log.Record{Value: []byte("two")})

	resp, err := b.Fetch(context.Background(), log.FetchRequest{
		Partitions: []log.FetchPartition{{TopicPartition: log.TopicPartition{Topic: "events"}, Offset: 0}},
	})
	if err != nil {
		panic(err)
	}
	defer resp.Release()
	fp := &resp.Partitions[0]
	var conn bytes.Buffer // a net.Conn in a server
	n, err := fp.Records.WriteTo(&conn)
	if err != nil {
		panic(err)
	}
	recs, _ := log.DecodeRecords(conn.Bytes())
	fmt.Printf("high watermark %d, all sent: %v, %d records: %s %s\n",
		fp.HighWatermark, n == fp.Records.Len(), len(recs), recs[0].Value, recs[1].Value)
	// Output: high watermark 2, all sent: true, 2 records: one two
}
