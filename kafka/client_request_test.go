package kafka

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
)

// TestRequestRefusesGarbage: Request and RequestBroker refuse a nil
// request (a nil interface or a nil pointer) and a negative version with
// log.ErrInvalidRequest, sending nothing (they panicked encoding it),
// and the Client still works.
func TestRequestRefusesGarbage(t *testing.T) {
	leaktest.Check(t)
	s, _, _ := start(t, Config{})
	ctx := context.Background()
	cl, err := Dial(ctx, DialConfig{Seeds: []string{s.Addr()}})
	require.NoError(t, err)
	defer cl.Close()
	var nilPtr *kmsg.MetadataRequest
	for _, c := range []struct {
		what string
		req  kmsg.Request
		v    int16
	}{
		{"nil", nil, 12},
		{"nil pointer", nilPtr, 12},
		{"version -1", kmsg.NewPtrMetadataRequest(), -1},
	} {
		_, err := cl.Request(ctx, c.req, c.v)
		require.ErrorIs(t, err, log.ErrInvalidRequest, "Request: %s", c.what)
		_, err = cl.RequestBroker(ctx, int(s.cfg.NodeID), c.req, c.v)
		require.ErrorIs(t, err, log.ErrInvalidRequest, "RequestBroker: %s", c.what)
	}
	resp, err := cl.RequestBroker(ctx, int(s.cfg.NodeID), kmsg.NewPtrMetadataRequest(), 12)
	require.NoError(t, err)
	require.NotEmpty(t, resp.(*kmsg.MetadataResponse).Brokers)
}
