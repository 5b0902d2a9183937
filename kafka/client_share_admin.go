package kafka

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/share"
)

// SetShareGroupConfig sets a share group's configs at the cluster, as
// share.Coordinator.SetGroupConfig does in the process: gc's non-zero
// fields are set (share.auto.offset.reset, share.record.lock.duration.ms,
// share.delivery.count.limit), its zero fields go back to the broker's
// (IncrementalAlterConfigs SET and DELETE on the GROUP resource).
func (c *Client) SetShareGroupConfig(ctx context.Context, group string, gc share.GroupConfig) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	set := func(name, value string, isSet bool) {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Op = name, opDelete
		if isSet {
			rc.Op, rc.Value = opSet, kmsg.StringPtr(value)
		}
		rr.Configs = append(rr.Configs, rc)
	}
	set("share.auto.offset.reset", gc.AutoOffsetReset, gc.AutoOffsetReset != "")
	set("share.record.lock.duration.ms", strconv.FormatInt(gc.LockDuration.Milliseconds(), 10), gc.LockDuration > 0)
	set("share.delivery.count.limit", strconv.Itoa(gc.DeliveryCountLimit), gc.DeliveryCountLimit > 0)
	req.Resources = append(req.Resources, rr)
	ctx, cancel := withRequestTimeout(ctx)
	defer cancel()
	bc, err := c.anyConn(ctx)
	if err != nil {
		return err
	}
	resp, err := bc.do(ctx, req, clientAlterConfigsMax)
	if err == nil {
		rs := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
		if len(rs) != 1 {
			err = codeError(errUnknownServerError)
		} else {
			err = responseErr(rs[0].ErrorCode, rs[0].ErrorMessage)
		}
	}
	if err != nil {
		return fmt.Errorf("kafka: set configs of share group %q: %w", group, err)
	}
	return nil
}
