package main

import (
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/stretchr/testify/require"
)

func TestEventStore(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, run(dir))
	require.NoError(t, run(dir)) // a second run replays, appends nothing

	b, err := log.Open(dir, log.Config{})
	require.NoError(t, err)
	defer b.Close()
	p, err := b.Partition("accounts", 0)
	require.NoError(t, err)
	require.EqualValues(t, 6, p.EndOffset())
	now, err := replay(p, 0, p.EndOffset())
	require.NoError(t, err)
	require.Equal(t, map[string]int{"alice": 70, "bob": 55}, now)
	then, err := replay(p, 0, 4)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"alice": 100, "bob": 40}, then)
}
