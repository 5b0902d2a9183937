package tp

import (
	"slices"
	"testing"
)

func TestCompareAndString(t *testing.T) {
	ps := []TopicPartition{{"b", 0}, {"a", 10}, {"a", 2}, {"", 1}}
	slices.SortFunc(ps, Compare)
	want := []TopicPartition{{"", 1}, {"a", 2}, {"a", 10}, {"b", 0}}
	if !slices.Equal(ps, want) {
		t.Fatalf("sorted %v, want %v", ps, want)
	}
	if s := (TopicPartition{"orders", 3}).String(); s != "orders-3" {
		t.Fatalf("String = %q", s)
	}
}
