package kafka

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/strata-log/strata/log"
)

// How the Client rides through failures, as Kafka's clients do: an error
// that may go away once the metadata is refreshed (a leader moved or died,
// a broker stopped, a topic is still being created, a coordinator moved)
// is retried after a backoff, within the caller's context. The backoff is
// Kafka's: retry.backoff.ms (100 ms), doubling up to retry.backoff.max.ms
// (1 s), with ±20% jitter (KIP-580), so that clients that lost the same
// broker do not come back in step. A call that ends on its context while
// retrying returns an error that matches both the context's error and the
// last cause with errors.Is.

const (
	retryBackoff    = 100 * time.Millisecond // Kafka's retry.backoff.ms
	retryBackoffMax = time.Second            // Kafka's retry.backoff.max.ms
	// retryLimit bounds the retries of a call whose context has no
	// deadline, from its first failure: Kafka's request.timeout.ms. A
	// call that succeeds may take longer (a JoinGroup waits for the
	// rebalance).
	retryLimit = 30 * time.Second
	// unknownTopicRetries is how often an unknown topic or partition is
	// retried: briefly, while a new topic's metadata reaches every
	// broker; a topic that does not exist is reported within about 2 s.
	unknownTopicRetries = 5
)

// backoffDelay is the wait before retry n (from 1).
func backoffDelay(n int) time.Duration {
	d := retryBackoff
	for i := 1; i < n && d < retryBackoffMax; i++ {
		d *= 2
	}
	d = min(d, retryBackoffMax)
	// ±20%, as Kafka's ExponentialBackoff.
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// expired reports whether ctx has ended or its deadline has passed: an
// operation that failed on a socket deadline set from ctx's may return a
// moment before ctx's own timer marks it done.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// doneErr is ctx's error once expired reports it: DeadlineExceeded while
// its timer has not marked it yet.
func doneErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// retrier paces the retries of one call.
type retrier struct {
	ctx     context.Context
	n       int       // retries so far
	unknown int       // of which after an unknown topic or partition
	first   time.Time // of the first failure
	last    error     // the last retriable error
}

// retry reports whether the call may be tried again after err: it waits the
// backoff and returns nil, or returns the error the call ends with — err
// itself if it is not retriable, or retriable too often, the context's
// error with the last cause if the context ends first.
func (r *retrier) retry(err error) error {
	if err == nil {
		return nil
	}
	if r.ctx.Err() != nil {
		return r.ctxErr(err)
	}
	if !retriable(err) {
		return err
	}
	if unknownTopic(err) {
		if r.unknown++; r.unknown > unknownTopicRetries {
			return err
		}
	}
	now := time.Now()
	if r.n == 0 {
		r.first = now
	}
	if _, ok := r.ctx.Deadline(); !ok && now.Sub(r.first) >= retryLimit {
		return fmt.Errorf("kafka: still failing after %v of retries: %w", retryLimit, err)
	}
	r.n++
	r.last = err
	t := time.NewTimer(backoffDelay(r.n))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.ctx.Done():
		return r.ctxErr(nil)
	}
}

// ctxErr is the error of a call whose context ended while it retried:
// the context's error and the last cause (err, unless it is the context's
// own error and an earlier one is known).
func (r *retrier) ctxErr(err error) error {
	return retryCtxErr(r.ctx, err, r.last)
}

// retryCtxErr is the error of a call whose ctx ended: its last attempt
// failed with err, an earlier retriable one with last (may be nil). The
// earlier one is the cause when known: an attempt cut short by the
// deadline fails for that (a write timed out, say), not for what kept the
// call retrying.
func retryCtxErr(ctx context.Context, err, last error) error {
	cerr := doneErr(ctx)
	cause := last
	if cause == nil && err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		cause = err
	}
	if cause == nil {
		if err != nil {
			return err
		}
		return cerr
	}
	return fmt.Errorf("%w while retrying; last error: %w", cerr, cause)
}

// retriable reports whether err may go away once the metadata is
// refreshed: a leader moved or is being elected, a topic is being created,
// a coordinator moved or loads, a connection broke or could not be made (a
// broker stopped), too few replicas are in sync for now.
func retriable(err error) bool {
	var ke *Error
	if errors.As(err, &ke) {
		switch ke.Code {
		case errNotLeaderOrFollower, errUnknownTopicOrPartition, errLeaderNotAvailable, errListenerNotFound,
			errNotEnoughReplicas, errFencedLeaderEpoch, errUnknownLeaderEpoch,
			errNotCoordinator, errCoordinatorNotAvailable, errCoordinatorLoadInProgress:
			return true
		}
		return false
	}
	return errors.Is(err, errConnClosed) || errors.Is(err, errDial) ||
		errors.Is(err, log.ErrNotLeader) || errors.Is(err, log.ErrUnknownTopic) || errors.Is(err, log.ErrUnknownPartition)
}

// unknownTopic reports whether err says a topic or partition is not known.
func unknownTopic(err error) bool {
	return errors.Is(err, log.ErrUnknownTopic) || errors.Is(err, log.ErrUnknownPartition)
}

// notSentError marks an error met before a request was written: a retry
// cannot duplicate it. It reads as the error it holds.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// notSent reports whether the request that failed with err surely did not
// reach the broker, or was refused by it without effect.
func notSent(err error) bool {
	var ns *notSentError
	var ke *Error
	return errors.As(err, &ns) || errors.Is(err, errDial) || errors.As(err, &ke) ||
		errors.Is(err, log.ErrNotLeader) || unknownTopic(err)
}
