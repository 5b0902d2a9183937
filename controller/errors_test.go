package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWireErrorCodesRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range wireErrors() {
		require.False(t, seen[c.code], "duplicate code %s", c.code)
		seen[c.code] = true
		wrapped := fmt.Errorf("context: %w", c.err)
		code := errorCode(wrapped)
		require.Equal(t, c.code, code)
		remote := &remoteError{msg: wrapped.Error(), sentinel: errorForCode(code)}
		require.ErrorIs(t, remote, c.err)
		require.Equal(t, wrapped.Error(), remote.Error())
	}
	require.Equal(t, "unknown", errorCode(errors.New("other")))
	require.Nil(t, errorForCode("unknown"))
}

func TestNotControllerError(t *testing.T) {
	var err error = &NotControllerError{}
	require.ErrorIs(t, err, ErrNotController)
	require.Equal(t, "controller: not the active controller (no leader known)", err.Error())

	err = fmt.Errorf("%w; %w", &NotControllerError{LeaderID: 2, LeaderAddr: "h:1", Err: context.Canceled}, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrNotController)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var nc *NotControllerError
	require.ErrorAs(t, err, &nc)
	require.Equal(t, 2, nc.LeaderID)
	require.Equal(t, "controller: not the active controller (leader is 2 at h:1): context canceled; context deadline exceeded", err.Error())
	require.Equal(t, ErrNotController.Error(), errorForCode(errorCode(err)).Error())
}
