package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request sends req to a broker of the cluster (any one it is connected
// to, or a seed) at the highest version that req, maxVersion and the
// broker all know, and returns the broker's response. It is for the
// requests the Client has no method for (topic administration, say); the
// caller reads the response at the version set on req. A response's
// error codes are the caller's to read: Request fails only when no broker
// answers.
func (c *Client) Request(ctx context.Context, req kmsg.Request, maxVersion int16) (kmsg.Response, error) {
	bc, err := c.anyConn(ctx)
	if err != nil {
		return nil, err
	}
	return bc.do(ctx, req, maxVersion)
}
