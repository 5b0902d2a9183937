package kafka

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys of the requests the server knows by number.
const (
	produceKey          int16 = 0
	fetchKey            int16 = 1
	listOffsetsKey      int16 = 2
	metadataKey         int16 = 3
	saslHandshakeKey    int16 = 17
	apiVersionsKey      int16 = 18
	createTopicsKey     int16 = 19
	deleteTopicsKey     int16 = 20
	describeConfigsKey  int16 = 32
	saslAuthenticateKey int16 = 36
	describeClusterKey  int16 = 60
)

// apiTable is what the server serves, with the versions: only what works
// is advertised in ApiVersions, and anything else closes the connection.
func (s *Server) apiTable() map[int16]*api {
	apis := []*api{
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
	for _, a := range s.replicaAPIs() {
		apis = append(apis, &a)
	}
	if s.cfg.SASL != nil {
		apis = append(apis,
			&api{key: saslHandshakeKey, min: 0, max: 1, handle: handleSASLOutOfOrder},
			&api{key: saslAuthenticateKey, min: 0, max: 2, handle: handleSASLOutOfOrder},
		)
	}
	m := make(map[int16]*api, len(apis))
	for _, a := range apis {
		if r := kmsg.RequestForKey(a.key); r == nil || r.MaxVersion() < a.max {
			panic("kafka: api table serves a version kmsg does not encode") // a bug caught by every test
		}
		m[a.key] = a
	}
	return m
}

// apiVersions is the ApiVersions response listing what the server serves.
func (s *Server) apiVersions(code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = code
	for _, a := range s.apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	sort.Slice(resp.ApiKeys, func(i, j int) bool { return resp.ApiKeys[i].ApiKey < resp.ApiKeys[j].ApiKey })
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
