package log_test

import (
	"fmt"
	"strconv"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/vfs"
)

// A replay rebuilds state from the log: Records reads it in large chunks
// and allocates nothing per record, so a record's Key and Value are only
// valid until the next iteration — copy (string(r.Key)) or decode what must
// be kept.
func ExamplePartition_Records() {
	b, err := log.Open("/data", log.Config{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	t, _ := b.CreateTopic("balances", log.TopicConfig{})
	p, _ := t.Partition(0)
	for _, e := range []struct{ account, delta string }{{"alice", "100"}, {"bob", "40"}, {"alice", "-30"}} {
		if _, err := p.Append(log.Record{Key: []byte(e.account), Value: []byte(e.delta)}); err != nil {
			panic(err)
		}
	}

	balances := map[string]int{}
	for r, err := range p.Records(p.StartOffset()) {
		if err != nil {
			panic(err) // out of range, corrupt, closed: the iteration stops
		}
		d, _ := strconv.Atoi(string(r.Value))
		balances[string(r.Key)] += d
	}
	fmt.Println(balances["alice"], balances["bob"])
	// Output: 70 40
}
