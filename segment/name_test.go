package segment

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNameIsPrintfs: a segment file's name is its base offset in 20 digits, as
// Kafka's, for every offset up to the largest.
func TestNameIsPrintfs(t *testing.T) {
	for _, base := range []int64{0, 1, 9, 10, 1042, 1 << 31, 1e18, math.MaxInt64} {
		require.Equal(t, fmt.Sprintf("%020d.log", base), Name(base, ".log"))
	}
	require.Equal(t, "00000000000000001042.index", Name(1042, ".index"))
	require.Equal(t, "-0000000000000000005", Name(-5, ""))
}
