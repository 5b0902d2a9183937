package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys of the requests the server knows by number.
const (
	produceKey          int16 = 0
	fetchKey            int16 = 1
	listOffsetsKey      int16 = 2
	metadataKey         int16 = 3
	offsetCommitKey     int16 = 8
	offsetFetchKey      int16 = 9
	findCoordinatorKey  int16 = 10
	joinGroupKey        int16 = 11
	heartbeatKey        int16 = 12
	leaveGroupKey       int16 = 13
	syncGroupKey        int16 = 14
	describeGroupsKey   int16 = 15
	listGroupsKey       int16 = 16
	saslHandshakeKey    int16 = 17
	apiVersionsKey      int16 = 18
	createTopicsKey     int16 = 19
	deleteTopicsKey     int16 = 20
	describeConfigsKey  int16 = 32
	saslAuthenticateKey int16 = 36
	deleteGroupsKey     int16 = 42
	describeClusterKey  int16 = 60
)

// The APIs the server serves, with the versions: only what works is
// advertised in ApiVersions, and anything else closes the connection.
// These tables are never written (TestAPITablesKmsg checks that kmsg
// encodes every version they name).
var (
	dataAPIs = []api{
		// Produce v3 is the first with record batches (magic 2), the only
		// format Strata stores.
		{key: produceKey, min: 3, max: 13, handle: handleProduce},
		// Fetch v4 is the first that returns record batches as they are.
		{key: fetchKey, min: 4, max: 16, handle: handleFetch},
		// ListOffsets v1 is the first with a single offset per partition;
		// v7+ add special timestamps (max timestamp, tiered storage)
		// Strata does not answer.
		{key: listOffsetsKey, min: 1, max: 6, handle: handleListOffsets},
		{key: metadataKey, min: 0, max: 12, handle: handleMetadata},
		{key: apiVersionsKey, min: 0, max: 3, handle: handleAPIVersions},
		{key: createTopicsKey, min: 0, max: 7, handle: handleCreateTopics},
		{key: deleteTopicsKey, min: 0, max: 6, handle: handleDeleteTopics},
		{key: describeConfigsKey, min: 0, max: 4, handle: handleDescribeConfigs},
		{key: describeClusterKey, min: 0, max: 1, handle: handleDescribeCluster},
	}
	// groupAPIs are served when the backend has a group coordinator.
	groupAPIs = []api{
		// v4+ batch the keys (KIP-699); v6 names share groups, which are
		// not served (nor transactions): only key type 0 is.
		{key: findCoordinatorKey, min: 0, max: 6, handle: handleFindCoordinator},
		// v4+ require a known member id (KIP-394), v5+ carry the instance
		// id of static members (KIP-345).
		{key: joinGroupKey, min: 0, max: 9, handle: handleJoinGroup},
		{key: syncGroupKey, min: 0, max: 5, handle: handleSyncGroup},
		{key: heartbeatKey, min: 0, max: 4, handle: handleHeartbeat},
		// v3+ leave a batch of members, by member or instance id.
		{key: leaveGroupKey, min: 0, max: 5, handle: handleLeaveGroup},
		// v10 names topics by id: not served yet.
		{key: offsetCommitKey, min: 0, max: 9, handle: handleOffsetCommit},
		// v8+ ask for several groups at once.
		{key: offsetFetchKey, min: 0, max: 9, handle: handleOffsetFetch},
		// v4 filters by state, v5 by type (every group is "classic").
		{key: listGroupsKey, min: 0, max: 5, handle: handleListGroups},
		{key: describeGroupsKey, min: 0, max: 6, handle: handleDescribeGroups},
		{key: deleteGroupsKey, min: 0, max: 2, handle: handleDeleteGroups},
	}
	// saslAPIs are served when Config.SASL is set (past authentication,
	// they answer ILLEGAL_SASL_STATE).
	saslAPIs = []api{
		{key: saslHandshakeKey, min: 0, max: 1, handle: handleSASLOutOfOrder},
		{key: saslAuthenticateKey, min: 0, max: 2, handle: handleSASLOutOfOrder},
	}
)

// maxAPIKey is the largest key of the tables (DeleteShareGroupOffsets,
// share.go).
const maxAPIKey = deleteShareGroupOffsetsKey

// apiSet is the APIs one server serves, by key.
type apiSet [maxAPIKey + 1]*api

// lookup returns the API of key, nil if not served.
func (t *apiSet) lookup(key int16) *api {
	if key < 0 || int(key) >= len(t) {
		return nil
	}
	return t[key]
}

// apiTable is what this server serves.
func (s *Server) apiTable() *apiSet {
	t := new(apiSet)
	add := func(apis []api) {
		for i := range apis {
			t[apis[i].key] = &apis[i]
		}
	}
	add(dataAPIs)
	for _, o := range optionalAPIs {
		if o.served(s) {
			add(o.apis)
		}
	}
	if s.cfg.Authorizer != nil {
		// Each API behind its authorization (authorize.go).
		for k, a := range t {
			if a != nil {
				g := *a
				g.handle = s.guard(g.key, g.handle)
				t[k] = &g
			}
		}
	}
	return t
}

// apiVersions is the ApiVersions response listing what the server serves,
// by key.
func (s *Server) apiVersions(code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = code
	for _, a := range s.apis {
		if a == nil {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	s.addTxnFeatures(resp) // txn_version.go
	return resp
}

func handleAPIVersions(_ context.Context, c *conn, _ kmsg.Request) reply {
	return reply{resp: c.s.apiVersions(errNone)}
}

// handleSASLOutOfOrder answers a SASL request of a connection that has
// authenticated already.
func handleSASLOutOfOrder(_ context.Context, _ *conn, r kmsg.Request) reply {
	resp := r.ResponseKind()
	switch resp := resp.(type) {
	case *kmsg.SASLHandshakeResponse:
		resp.ErrorCode = errIllegalSaslState
	case *kmsg.SASLAuthenticateResponse:
		resp.ErrorCode = errIllegalSaslState
	}
	return reply{resp: resp}
}
