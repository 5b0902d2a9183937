package main

import (
	"fmt"
	"strconv"
	"time"
)

// txnOverrideKeys are the transaction coordinator's settings serve takes
// with --override (a standalone broker's: log.Config), in ms as Kafka's.
var txnOverrideKeys = []string{
	"transaction.abort.timed.out.transaction.cleanup.interval.ms",
	"transaction.max.timeout.ms",
	"transaction.version",
	"transactional.id.expiration.ms",
}

// txnOverride applies one of txnOverrideKeys; false if k is not one.
func (c *serveConfig) txnOverride(k, v string) (bool, error) {
	var dst *time.Duration
	switch k {
	case "transaction.version":
		// Kafka's feature of that name (kafka-features.sh), finalized in
		// ApiVersions; 2 by default, as Kafka 4's for a new cluster.
		n, err := strconv.ParseInt(v, 10, 16)
		if err != nil || n < 0 || n > 2 {
			return true, fmt.Errorf("%s: want 0, 1 or 2 (not %q)", k, v)
		}
		c.server.TransactionVersion = int16(n)
		if n == 0 {
			c.server.TransactionVersion = -1 // kafka.Config's 0 is the default, 2
		}
		c.broker.TransactionVersion = c.server.TransactionVersion // the coordinator's own aborts
		return true, nil
	case "transaction.max.timeout.ms":
		dst = &c.broker.TransactionMaxTimeout
	case "transactional.id.expiration.ms":
		dst = &c.broker.TransactionalIDExpiration
	case "transaction.abort.timed.out.transaction.cleanup.interval.ms":
		dst = &c.broker.TransactionAbortTimedOutInterval
	default:
		return false, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return true, fmt.Errorf("%s: want ms, a whole number from 1 to 2147483647 (not %q)", k, v)
	}
	*dst = time.Duration(n) * time.Millisecond
	return true, nil
}
