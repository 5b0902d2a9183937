package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQuickstartTwice: the second run's consumer resumes after the first
// run's commit.
func TestQuickstartTwice(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, run(context.Background(), dir))
	require.NoError(t, run(context.Background(), dir))
}
