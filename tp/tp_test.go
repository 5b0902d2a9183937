package tp

import (
	"fmt"
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

func TestTopicID(t *testing.T) {
	a, b := TopicID("a"), TopicID("b")
	if a == b || a == ([16]byte{}) || TopicID("a") != a {
		t.Fatalf("ids %x %x", a, b)
	}
	// The ids are stable: clients and records keep them across versions.
	if got := TopicID("orders"); fmt.Sprintf("%x", got) != "79011fb0d3caba7c8a55a032ef5dbf33" {
		t.Fatalf("TopicID(orders) = %x", got)
	}
}
