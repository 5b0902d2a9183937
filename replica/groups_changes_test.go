package replica

import (
	"cmp"
	"testing"

	"github.com/stretchr/testify/require"
)

// coordinatorChanges: a coordinator runs exactly while its member leads
// the partition in the epoch it was loaded in.
func TestCoordinatorChanges(t *testing.T) {
	for _, tc := range []struct {
		name        string
		led, want   map[int]int32
		stop, start []int
	}{
		{name: "nothing led, nothing to lead"},
		{name: "becomes leader of two", want: map[int]int32{3: 0, 1: 2}, start: []int{1, 3}},
		{name: "steady", led: map[int]int32{1: 2, 3: 0}, want: map[int]int32{1: 2, 3: 0}},
		{name: "leadership moves away", led: map[int]int32{1: 2, 3: 0}, want: map[int]int32{3: 0}, stop: []int{1}},
		{
			// Led again in a later epoch: another leader may have taken
			// commits in between, so the state is read again.
			name: "led again in a new epoch", led: map[int]int32{1: 2}, want: map[int]int32{1: 4},
			stop: []int{1}, start: []int{1},
		},
		{name: "member stops leading all", led: map[int]int32{0: 1, 5: 1, 9: 3}, stop: []int{0, 5, 9}},
		{
			name: "mixed", led: map[int]int32{0: 1, 2: 1, 4: 1}, want: map[int]int32{0: 1, 2: 2, 6: 0},
			stop: []int{2, 4}, start: []int{2, 6},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop, start := coordinatorChanges(tc.led, tc.want, cmp.Compare[int])
			require.Equal(t, tc.stop, stop, "stop")
			require.Equal(t, tc.start, start, "start")
		})
	}
}
