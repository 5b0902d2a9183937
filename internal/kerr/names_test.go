package kerr

import "testing"

func TestName(t *testing.T) {
	for _, c := range []struct {
		code int16
		want string
	}{
		{UnknownServerError, "UNKNOWN_SERVER_ERROR"},
		{None, "NONE"},
		{NotLeaderOrFollower, "NOT_LEADER_OR_FOLLOWER"},
		{CoordinatorLoadInProgress, "COORDINATOR_LOAD_IN_PROGRESS"},
		{ConcurrentTransactions, "CONCURRENT_TRANSACTIONS"},
		{UnknownProducerID, "UNKNOWN_PRODUCER_ID"},
		{GroupIDNotFound, "GROUP_ID_NOT_FOUND"},
		{UnknownTopicID, "UNKNOWN_TOPIC_ID"},
		{TransactionalIDNotFound, "TRANSACTIONAL_ID_NOT_FOUND"},
		{FencedMemberEpoch, "FENCED_MEMBER_EPOCH"},
		{UnsupportedEndpointType, "UNSUPPORTED_ENDPOINT_TYPE"},
		{TransactionAbortable, "TRANSACTION_ABORTABLE"},
		{InvalidRecordState, "INVALID_RECORD_STATE"},
		{InvalidShareSessionEpoch, "INVALID_SHARE_SESSION_EPOCH"},
		{InvalidRegularExpression, "INVALID_REGULAR_EXPRESSION"},
		{133, "SHARE_SESSION_LIMIT_REACHED"},
		{134, "ERROR_CODE_134"},
		{-2, "ERROR_CODE_-2"},
	} {
		if got := Name(c.code); got != c.want {
			t.Errorf("Name(%d) = %q, want %q", c.code, got, c.want)
		}
	}
}
