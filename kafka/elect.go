package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/kerr"
	"github.com/strata-log/strata/log"
)

// LeaderElector is a cluster member that elects partition leaders on
// demand (Kafka's ElectLeaders, KIP-460): preferred elections move
// leadership to each partition's first replica, unclean ones (only when
// asked) give a leaderless partition any live replica. Partitions nil
// means every partition. A partition's Err errors.Is
// ErrElectionNotNeeded (ELECTION_NOT_NEEDED),
// ErrPreferredLeaderNotAvailable (PREFERRED_LEADER_NOT_AVAILABLE),
// ErrEligibleLeadersNotAvailable (ELIGIBLE_LEADERS_NOT_AVAILABLE) or
// log.ErrUnknownTopic (UNKNOWN_TOPIC_OR_PARTITION).
type LeaderElector interface {
	ElectLeaders(ctx context.Context, unclean bool, partitions []log.TopicPartition) ([]ElectionResult, error)
}

// ElectionResult is one partition's outcome: Err nil when it was elected.
type ElectionResult struct {
	Topic     string
	Partition int
	Err       error
}

// The per-partition outcomes of an election that did not elect.
var (
	ErrElectionNotNeeded           = errors.New("kafka: election not needed")
	ErrPreferredLeaderNotAvailable = errors.New("kafka: preferred leader not available")
	ErrEligibleLeadersNotAvailable = errors.New("kafka: eligible leaders not available")
)

const (
	electLeadersKey                            int16 = 43
	codePreferredLeaderNotAvailable            int16 = 80
	codeEligibleLeadersNotAvailable            int16 = 83
	codeElectionNotNeeded                      int16 = 84
	electLeadersDefaultTimeout                       = 30 * time.Second
	electionTypePreferred, electionTypeUnclean int8  = 0, 1
)

var electLeadersAPIs = []api{{key: electLeadersKey, min: 0, max: 2, handle: handleElectLeaders}}

// electCode is the Kafka error code of a partition's election error.
func electCode(err error) int16 {
	return partitionCode(err,
		kerr.Row{Err: ErrElectionNotNeeded, Code: codeElectionNotNeeded},
		kerr.Row{Err: ErrPreferredLeaderNotAvailable, Code: codePreferredLeaderNotAvailable},
		kerr.Row{Err: ErrEligibleLeadersNotAvailable, Code: codeEligibleLeadersNotAvailable})
}

// partitionCode is the Kafka error code of one partition's error in an
// admin answer (ElectLeaders, AlterPartitionReassignments): the API's own
// codes first, then UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or
// partition, then the server's table.
func partitionCode(err error, own ...kerr.Row) int16 {
	for _, r := range own {
		if errors.Is(err, r.Err) {
			return r.Code
		}
	}
	if errors.Is(err, log.ErrUnknownTopic) || errors.Is(err, log.ErrUnknownPartition) {
		return codeUnknownTopicPartition
	}
	return errorCode(err)
}

// handleElectLeaders runs an election through the LeaderElector: v0 is
// preferred; null topics is every partition.
func handleElectLeaders(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	typ := electionTypePreferred
	if req.Version >= 1 {
		typ = req.ElectionType
	}
	var tps []log.TopicPartition
	if req.Topics != nil {
		tps = []log.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, log.TopicPartition{Topic: t.Topic, Partition: int(p)})
			}
		}
	}
	fail := func(err error) reply {
		if req.Version >= 1 {
			resp.ErrorCode = errorCode(err)
			return reply{resp: resp}
		}
		// v0 has no top-level error: every partition asked gets it.
		for _, tp := range tps {
			addElectResult(resp, tp.Topic, tp.Partition, errorCode(err), err)
		}
		return reply{resp: resp}
	}
	if typ != electionTypePreferred && typ != electionTypeUnclean {
		return fail(fmt.Errorf("%w: election type %d", errInvalidRequestErr, typ))
	}
	d := electLeadersDefaultTimeout
	if req.TimeoutMillis > 0 {
		d = time.Duration(req.TimeoutMillis) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	res, err := c.s.caps.elector.ElectLeaders(ctx, typ == electionTypeUnclean, tps)
	if err != nil {
		return fail(err)
	}
	for _, x := range res {
		code := int16(0)
		if x.Err != nil {
			code = electCode(x.Err)
		}
		addElectResult(resp, x.Topic, x.Partition, code, x.Err)
	}
	return reply{resp: resp}
}

// addElectResult appends one partition's outcome under its topic.
func addElectResult(resp *kmsg.ElectLeadersResponse, topic string, partition int, code int16, err error) {
	if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != topic {
		t := kmsg.NewElectLeadersResponseTopic()
		t.Topic = topic
		resp.Topics = append(resp.Topics, t)
	}
	t := &resp.Topics[len(resp.Topics)-1]
	p := kmsg.NewElectLeadersResponseTopicPartition()
	p.Partition, p.ErrorCode = int32(partition), code
	if err != nil {
		p.ErrorMessage = kmsg.StringPtr(err.Error())
	}
	t.Partitions = append(t.Partitions, p)
}
