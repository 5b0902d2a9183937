package machinetest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/replica/internal/machine"
	"github.com/strata-log/strata/replica/internal/machine/machinetest"
)

func TestEpochsEndOffsetFor(t *testing.T) {
	var c machinetest.Epochs
	e, off := c.EndOffsetFor(1)
	require.Equal(t, []any{machine.NoEpoch, machine.NoOffset}, []any{e, off}, "empty")

	c.Assign(2, 10)
	c.Assign(4, 30)
	c.Assign(4, 35) // already latest: no change
	c.Assign(6, 50)
	c.End = 70
	cases := []struct {
		epoch int32
		want  machine.EpochEnd
	}{
		{machine.NoEpoch, machine.EpochEnd{Epoch: machine.NoEpoch, EndOffset: machine.NoOffset}},
		{1, machine.EpochEnd{Epoch: 1, EndOffset: 10}}, // below the first: its start
		{2, machine.EpochEnd{Epoch: 2, EndOffset: 30}},
		{3, machine.EpochEnd{Epoch: 2, EndOffset: 30}}, // the largest below
		{4, machine.EpochEnd{Epoch: 4, EndOffset: 50}},
		{5, machine.EpochEnd{Epoch: 4, EndOffset: 50}},
		{6, machine.EpochEnd{Epoch: 6, EndOffset: 70}}, // the latest: the log end
		{7, machine.EpochEnd{Epoch: machine.NoEpoch, EndOffset: machine.NoOffset}},
	}
	for _, tc := range cases {
		e, off := c.EndOffsetFor(tc.epoch)
		require.Equal(t, tc.want, machine.EpochEnd{Epoch: e, EndOffset: off}, "epoch %d", tc.epoch)
	}
	require.Equal(t, int32(6), c.Latest())

	c.TruncateTo(40) // epoch 6 goes
	require.Equal(t, int32(4), c.Latest())
	e, off = c.EndOffsetFor(4)
	require.Equal(t, []any{int32(4), int64(40)}, []any{e, off})

	c.Assign(3, 20) // a smaller epoch drops the later entries
	require.Equal(t, []machine.EpochEnd{{Epoch: 2, EndOffset: 10}, {Epoch: 3, EndOffset: 20}}, c.Entries)
}
