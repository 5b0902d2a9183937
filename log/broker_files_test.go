package log

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/strata-log/strata/vfs"
)

// TestTopicsJSON: topics.json as written decodes to the topics and their
// configurations, and reopens.
func TestTopicsJSON(t *testing.T) {
	fs := vfs.NewMem()
	b, err := Open("/data", Config{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	cfgs := map[string]TopicConfig{
		"orders":     {Partitions: 3, RetentionTime: time.Hour},
		"a.b_c-9":    {Partitions: 1, SegmentBytes: 1 << 20},
		"zz-events0": {},
	}
	for name, cfg := range cfgs {
		if _, err := b.CreateTopic(name, cfg); err != nil {
			t.Fatal(err)
		}
	}
	data, err := vfs.ReadFile(fs, "/data/"+topicsFile)
	if err != nil {
		t.Fatal(err)
	}
	var meta topicsMeta
	if err := json.Unmarshal(data, &meta); err != nil {
		t.Fatalf("topics.json is not JSON: %v\n%s", err, data)
	}
	want := map[string]TopicConfig{}
	for name := range cfgs {
		tp, err := b.Topic(name)
		if err != nil {
			t.Fatal(err)
		}
		want[name] = tp.Config()
	}
	if meta.Version != topicsVersion || !reflect.DeepEqual(meta.Topics, want) {
		t.Fatalf("topics.json = %+v, want version %d and %+v", meta, topicsVersion, want)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Open("/data", Config{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Topics(); !reflect.DeepEqual(got, []string{"a.b_c-9", "orders", "zz-events0"}) {
		t.Fatalf("reopened: topics %q", got)
	}
}

// TestFormatCheckpoint: the checkpoint format, sorted, and read back.
func TestFormatCheckpoint(t *testing.T) {
	offsets := map[TopicPartition]int64{
		{Topic: "orders", Partition: 1}:      977,
		{Topic: "orders", Partition: 0}:      1042,
		{Topic: "a", Partition: 12}:          0,
		{Topic: "big", Partition: 1<<31 - 1}: 1<<63 - 1,
	}
	want := "0\n4\na 12 0\nbig 2147483647 9223372036854775807\norders 0 1042\norders 1 977\n"
	if got := string(formatCheckpoint(offsets)); got != want {
		t.Fatalf("formatCheckpoint = %q, want %q", got, want)
	}
	if got := string(formatCheckpoint(nil)); got != "0\n0\n" {
		t.Fatalf("empty checkpoint = %q", got)
	}
	fs := vfs.NewMem()
	if err := writeCheckpoint(fs, "/c", formatCheckpoint(offsets)); err != nil {
		t.Fatal(err)
	}
	got, err := readCheckpoint(fs, "/c")
	if err != nil || !reflect.DeepEqual(got, offsets) {
		t.Fatalf("read back %v, %v", got, err)
	}
}
