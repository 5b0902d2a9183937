package assign

import (
	"fmt"
	"testing"
)

// benchSpec is a group of members over topics of 200 partitions each,
// all subscribed to every topic (homogeneous) or to 80 of the 100
// (heterogeneous), with the assignment a first Assign gave them and one
// member more: the rebalance a join makes.
func benchSpec(b *testing.B, members, topics int, hetero bool) Spec {
	s := Spec{Topics: map[string]Topic{}}
	var names []string
	for i := range topics {
		n := fmt.Sprintf("t%03d", i)
		names = append(names, n)
		s.Topics[n] = Topic{Partitions: 200}
	}
	for i := range members {
		ts := names
		if hetero {
			ts = names[i%(topics/5) : i%(topics/5)+topics*4/5]
		}
		s.Members = append(s.Members, Member{ID: fmt.Sprintf("m%05d", i), Topics: ts})
	}
	got := Uniform{}.Assign(s)
	for i := range s.Members {
		s.Members[i].Current = got[s.Members[i].ID]
	}
	s.Members = append(s.Members, Member{ID: "joiner", Topics: names})
	return s
}

func BenchmarkUniformJoin(b *testing.B) {
	for _, size := range []struct{ members, topics int }{{100, 10}, {2000, 100}} {
		for _, hetero := range []bool{false, true} {
			b.Run(fmt.Sprintf("members=%d/partitions=%d/heterogeneous=%v", size.members, size.topics*200, hetero), func(b *testing.B) {
				s := benchSpec(b, size.members, size.topics, hetero)
				b.ReportAllocs()
				for b.Loop() {
					Uniform{}.Assign(s)
				}
			})
		}
	}
}
