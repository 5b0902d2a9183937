package kafka

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/share"
)

// A share group's configs (Kafka's group configs, KIP-932), described and
// altered as a GROUP resource (DescribeConfigs, IncrementalAlterConfigs):
// share.auto.offset.reset, share.record.lock.duration.ms and
// share.delivery.count.limit, kept by the share coordinator.

// shareGroupConfigNames are the group configs served, in order.
var shareGroupConfigNames = []string{"share.auto.offset.reset", "share.delivery.count.limit", "share.record.lock.duration.ms"}

// shareConfigValue is a config's value in gc and whether it was set.
func shareConfigValue(name string, gc share.GroupConfig) (string, bool) {
	switch name {
	case "share.auto.offset.reset":
		if gc.AutoOffsetReset == "" {
			return share.ResetLatest.String(), false
		}
		return gc.AutoOffsetReset, true
	case "share.delivery.count.limit":
		if gc.DeliveryCountLimit == 0 {
			return strconv.Itoa(share.DefaultDeliveryCountLimit), false
		}
		return strconv.Itoa(gc.DeliveryCountLimit), true
	case "share.record.lock.duration.ms":
		if gc.LockDuration == 0 {
			return strconv.FormatInt(share.DefaultLockDuration.Milliseconds(), 10), false
		}
		return strconv.FormatInt(gc.LockDuration.Milliseconds(), 10), true
	}
	return "", false
}

// describeGroupConfig fills res with group's configs (names: those
// asked for; nil: all). It reports false if the server has no share
// groups.
func (s *Server) describeGroupConfig(group string, names []string, res *kmsg.DescribeConfigsResponseResource) bool {
	if s.caps.shares == nil {
		return false
	}
	gc := s.caps.shares.coord().GroupConfig(group)
	for _, n := range shareGroupConfigNames {
		if names != nil && !containsString(names, n) {
			continue
		}
		v, set := shareConfigValue(n, gc)
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value = n, kmsg.StringPtr(v)
		rc.IsDefault = !set
		rc.Source = kmsg.ConfigSourceDefaultConfig
		if set {
			rc.Source = kmsg.ConfigSourceGroupConfig
		}
		res.Configs = append(res.Configs, rc)
	}
	return true
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// alterGroupConfig applies (or, validateOnly, checks) one GROUP
// resource's operations: SET and DELETE of the share configs; any other
// config is INVALID_CONFIG.
func (s *Server) alterGroupConfig(rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	if s.caps.shares == nil {
		return fmt.Errorf("%w: group configs are not served", errInvalidRequestErr)
	}
	if rr.ResourceName == "" {
		return fmt.Errorf("%w: empty group id", errInvalidRequestErr)
	}
	coord := s.caps.shares.coord()
	gc := coord.GroupConfig(rr.ResourceName)
	for _, op := range rr.Configs {
		value := ""
		if op.Value != nil {
			value = *op.Value
		}
		switch op.Op {
		case opSet, opDelete:
		default:
			return fmt.Errorf("%w: %s: only SET and DELETE apply", errInvalidRequestErr, op.Name)
		}
		del := op.Op == opDelete
		if !del && op.Value == nil {
			return fmt.Errorf("%w: %s: SET without a value", log.ErrInvalidConfig, op.Name)
		}
		switch op.Name {
		case "share.auto.offset.reset":
			if del {
				gc.AutoOffsetReset = ""
			} else if _, err := share.ParseOffsetReset(value); err != nil {
				return fmt.Errorf("%w: %v", log.ErrInvalidConfig, err)
			} else {
				gc.AutoOffsetReset = value
			}
		case "share.delivery.count.limit", "share.record.lock.duration.ms":
			n := int64(0)
			if !del {
				var err error
				if n, err = strconv.ParseInt(value, 10, 32); err != nil || n <= 0 {
					return fmt.Errorf("%w: %s=%q", log.ErrInvalidConfig, op.Name, value)
				}
			}
			if op.Name == "share.delivery.count.limit" {
				gc.DeliveryCountLimit = int(n)
			} else {
				gc.LockDuration = time.Duration(n) * time.Millisecond
			}
		default:
			return fmt.Errorf("%w: unknown group config %s", log.ErrInvalidConfig, op.Name)
		}
	}
	if validateOnly {
		return nil
	}
	return coord.SetGroupConfig(rr.ResourceName, gc)
}
