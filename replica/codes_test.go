package replica

import (
	"errors"
	"testing"

	"github.com/strata-log/strata/log"
)

// A Kafka error code the replication path has no entry of its own for
// comes back as the Kafka server's table says (UNKNOWN_PRODUCER_ID is
// log.ErrUnknownProducerID, which an idempotent Producer retries after
// the batches before it), and such errors go out with their codes.
func TestCodesFallBackToKafkasTable(t *testing.T) {
	for _, c := range []struct {
		code int16
		want error
	}{
		{59, log.ErrUnknownProducerID},
		{45, log.ErrOutOfOrderSequence},
		{47, log.ErrProducerFenced}, // INVALID_PRODUCER_EPOCH, what Produce answers
		{6, log.ErrNotLeader},
	} {
		if err := errOf(c.code); !errors.Is(err, c.want) {
			t.Errorf("errOf(%d) = %v, want %v", c.code, err, c.want)
		}
		if got := codeOf(c.want); got != c.code {
			t.Errorf("codeOf(%v) = %d, want %d", c.want, got, c.code)
		}
	}
	if errOf(0) != nil || codeOf(nil) != 0 {
		t.Error("code 0 is no error")
	}
}
