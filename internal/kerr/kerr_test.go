package kerr

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/log"
)

func TestTableBothWays(t *testing.T) {
	for _, r := range Rows() {
		if got := Code(fmt.Errorf("context: %w", r.Err)); got != r.Code {
			t.Errorf("Code(%v) = %d, want %d", r.Err, got, r.Code)
		}
		back := ErrorOf(r.Code)
		if back == nil || Code(back) != r.Code {
			t.Errorf("ErrorOf(%d) = %v, whose code is %d", r.Code, back, Code(back))
		}
	}
	if Code(nil) != None || ErrorOf(None) != nil {
		t.Error("code 0 is no error")
	}
	if Code(errors.New("other")) != UnknownServerError || ErrorOf(9999) != nil {
		t.Error("an error or a code outside the table")
	}
}

func TestReaders(t *testing.T) {
	for _, c := range []struct {
		code int16
		want error
	}{
		{LeaderNotAvailable, log.ErrNotLeader},
		{FencedLeaderEpoch, log.ErrNotLeader},
		{UnknownLeaderEpoch, log.ErrNotLeader},
		{InvalidRequest, log.ErrInvalidRequest},
		{CoordinatorNotAvailable, log.ErrClosed},
		{InvalidReplicationFactor, log.ErrInvalidConfig},
	} {
		if err := ErrorOf(c.code); !errors.Is(err, c.want) {
			t.Errorf("ErrorOf(%d) = %v, want a %v", c.code, err, c.want)
		}
	}
	// Order: a closed coordinator is a log.ErrClosed but keeps its code.
	if Code(group.ErrClosed) != CoordinatorNotAvailable || Code(log.ErrClosed) != NotLeaderOrFollower {
		t.Error("group.ErrClosed must be tried before log.ErrClosed")
	}
	if Code(log.ErrInvalidRequest) != InvalidRequest {
		t.Error("log.ErrInvalidRequest is INVALID_REQUEST")
	}
}
