package log

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/clock/clocktest"
	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/vfs"
)

// The broker reads time from Config.Clock: a segment rolls when the fake
// clock, not the wall clock, passes SegmentTime; a zero record timestamp is
// the fake now; retention measures record age on the fake clock.
func TestBrokerRunsOnConfigClock(t *testing.T) {
	leaktest.Check(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktest.New(start)
	b, err := Open("d", Config{FS: vfs.NewMem(), Clock: clk, RetentionCheckInterval: time.Minute})
	require.NoError(t, err)
	defer b.Close()
	tp, err := b.CreateTopic("t", TopicConfig{SegmentTime: time.Hour, RetentionTime: 2 * time.Hour})
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)

	_, err = p.Append(Record{Value: []byte("a")}) // stamped with the fake time
	require.NoError(t, err)
	_, err = p.Append(Record{Value: []byte("b")})
	require.NoError(t, err)
	require.Equal(t, 1, p.Segments(), "an hour has not passed on the broker's clock")

	clk.Advance(time.Hour + time.Second)
	_, err = p.Append(Record{Value: []byte("c")})
	require.NoError(t, err)
	require.Equal(t, 2, p.Segments(), "the fake hour rolled the segment")
	recs, err := p.Read(0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, start.UnixMilli(), recs[0].Timestamp.UnixMilli(), "a zero timestamp means the broker's now")

	// Past the retention time of the first segment's records, retention
	// deletes it.
	clk.Advance(2*time.Hour + time.Minute)
	b.enforceRetention(clk.Now())
	require.EqualValues(t, 2, p.StartOffset(), "retention measured on the broker's clock")
}
