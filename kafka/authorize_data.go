package kafka

import (
	"context"
	"errors"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authorizeRules is each API's authorization (Kafka's KafkaApis), by key;
// a nil rule checks nothing. Keys not here need ClusterAction (guard).
var authorizeRules = map[int16]rule{
	apiVersionsKey:      nil,
	saslHandshakeKey:    nil,
	saslAuthenticateKey: nil,
	produceKey:          authorizeProduce,
	fetchKey:            authorizeFetch,
	listOffsetsKey:      authorizeListOffsets,
	metadataKey:         authorizeMetadata,
	describeClusterKey:  authorizeDescribeCluster,
	initProducerIDKey:   authorizeInitProducerID,

	offsetForLeaderEpochKey: authorizeOffsetForLeaderEpoch,

	findCoordinatorKey: authorizeFindCoordinator,
	joinGroupKey:       authorizeGroupRead,
	syncGroupKey:       authorizeGroupRead,
	heartbeatKey:       authorizeGroupRead,
	leaveGroupKey:      authorizeGroupRead,
	offsetCommitKey:    authorizeOffsetCommit,
	offsetFetchKey:     authorizeOffsetFetch,
	listGroupsKey:      authorizeListGroups,
	describeGroupsKey:  authorizeDescribeGroups,
	deleteGroupsKey:    authorizeDeleteGroups,

	consumerGroupHeartbeatKey: authorizeConsumerGroupHeartbeat,
	consumerGroupDescribeKey:  authorizeConsumerGroupDescribe,

	createTopicsKey:            authorizeCreateTopics,
	deleteTopicsKey:            authorizeDeleteTopics,
	createPartitionsKey:        authorizeCreatePartitions,
	deleteRecordsKey:           authorizeDeleteRecords,
	describeConfigsKey:         authorizeDescribeConfigs,
	incrementalAlterConfigsKey: authorizeAlterConfigs,

	describeACLsKey: authorizeACLs,
	createACLsKey:   authorizeACLs,
	deleteACLsKey:   authorizeACLs,

	describeUserSCRAMKey:    authorizeSCRAMAdmin,
	alterUserSCRAMKey:       authorizeSCRAMAdmin,
	describeClientQuotasKey: authorizeClientQuotas,
	alterClientQuotasKey:    authorizeClientQuotas,
}

// topicOf is the name of a topic a request names by name or, when byID,
// by id; ok false for an id no topic has (the handler answers it).
func (c *conn) topicOf(name string, id [16]byte, byID bool) (string, bool) {
	if !byID {
		return name, true
	}
	return c.s.topicName(id)
}

// split returns the elements of in the connection may act on and those it
// may not; denied reports whether one element is refused.
func split[T any](in []T, denied func(*T) bool) (keep, refused []T) {
	for i := range in {
		if denied(&in[i]) {
			refused = append(refused, in[i])
		} else {
			keep = append(keep, in[i])
		}
	}
	if keep == nil && in != nil {
		keep = in[:0:0]
	}
	return keep, refused
}

// serve calls next with req unless empty says there is nothing left to
// serve, in which case it returns an empty response of req's kind.
func serve(ctx context.Context, c *conn, req kmsg.Request, empty bool, next handler) reply {
	if empty {
		resp := req.ResponseKind()
		defaults(resp)
		return reply{resp: resp}
	}
	return next(ctx, c, req)
}

// allRefused says what guard does with a request whose every item is
// refused.
type allRefused bool

const (
	// answerEmpty: an empty response of the request's kind, no handler
	// (the request was only its items).
	answerEmpty allRefused = false
	// serveEmpty: the handler runs with no item left (it has more to do:
	// a share session's epoch, the group's own errors).
	serveEmpty allRefused = true
)

// guard is the rule of a request whose items the connection may be
// refused one by one, as Kafka checks most of them: *items (a slice of
// req) is split by denied; with nothing refused req goes to next
// untouched; otherwise only the allowed items are served (none left:
// as whenAll says) and refuse appends the refused ones, each
// with its error, to the response.
func guard[T any, R kmsg.Response](ctx context.Context, c *conn, req kmsg.Request, items *[]T, denied func(*T) bool,
	whenAll allRefused, next handler, refuse func(resp R, refused []T)) reply {
	keep, refused := split(*items, denied)
	if refused == nil {
		return next(ctx, c, req)
	}
	*items = keep
	rep := serve(ctx, c, req, len(keep) == 0 && whenAll == answerEmpty, next)
	if resp, ok := rep.resp.(R); ok {
		refuse(resp, refused)
	}
	return rep
}

// after wraps next with then, called on the response when it is of kind R.
func after[R kmsg.Response](next handler, then func(R)) handler {
	return func(ctx context.Context, c *conn, req kmsg.Request) reply {
		rep := next(ctx, c, req)
		if resp, ok := rep.resp.(R); ok {
			then(resp)
		}
		return rep
	}
}

// defaults sets resp's fields to their defaults (kmsg's Default).
func defaults(resp kmsg.Response) {
	if d, ok := resp.(interface{ Default() }); ok {
		d.Default()
	}
}

// authorizeProduce: Write on each topic (and on the transactional id of a
// transactional produce).
func authorizeProduce(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ProduceRequest)
	byID := req.Version >= 13
	txnDenied := req.TransactionID != nil && !c.allowed(acl.OpWrite, acl.TransactionalID(*req.TransactionID))
	keep, refused := split(req.Topics, func(t *kmsg.ProduceRequestTopic) bool {
		name, ok := c.topicOf(t.Topic, t.TopicID, byID)
		return txnDenied || ok && !c.allowed(acl.OpWrite, acl.Topic(name))
	})
	if refused == nil {
		return next(ctx, c, req)
	}
	req.Topics = keep
	rep := serve(ctx, c, req, len(keep) == 0, next)
	if req.Acks == 0 {
		// Kafka closes an acks=0 connection whose produce failed.
		return reply{none: true, closeAfter: true}
	}
	code := errTopicAuthorizationFailed
	if txnDenied {
		code = errTransactionalIDAuthorizationFailed
	}
	resp := rep.resp.(*kmsg.ProduceResponse)
	for _, rt := range refused {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, code
			p.BaseOffset, p.LogAppendTime, p.LogStartOffset = -1, -1, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return rep
}

// authorizeFetch: Read on each topic; a follower's fetch needs
// ClusterAction on the cluster, every partition refused otherwise.
func authorizeFetch(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.FetchRequest)
	byID := req.Version >= 13
	follower := req.ReplicaID >= 0 || req.ReplicaState.ID >= 0
	clusterDenied := follower && !c.allowed(acl.OpClusterAction, acl.Cluster())
	keep, refused := split(req.Topics, func(t *kmsg.FetchRequestTopic) bool {
		if follower {
			return clusterDenied
		}
		name, ok := c.topicOf(t.Topic, t.TopicID, byID)
		return ok && !c.allowed(acl.OpRead, acl.Topic(name))
	})
	if refused == nil {
		return next(ctx, c, req)
	}
	req.Topics = keep
	rep := serve(ctx, c, req, len(keep) == 0, next)
	resp := rep.resp.(*kmsg.FetchResponse)
	for _, rt := range refused {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = rp.Partition, errTopicAuthorizationFailed
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			t.Partitions = append(t.Partitions, p)
			if rep.records != nil {
				// The handler's records go one per partition of the
				// response, in order: these have none.
				rep.records = append(rep.records, fetched{})
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return rep
}

// authorizeListOffsets: Describe on each topic.
func authorizeListOffsets(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.ListOffsetsRequest)
	denied := func(t *kmsg.ListOffsetsRequestTopic) bool {
		return !c.allowed(acl.OpDescribe, acl.Topic(t.Topic))
	}
	return guard(ctx, c, req, &req.Topics, denied, answerEmpty, next,
		func(resp *kmsg.ListOffsetsResponse, refused []kmsg.ListOffsetsRequestTopic) {
			for _, rt := range refused {
				t := kmsg.NewListOffsetsResponseTopic()
				t.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					p := kmsg.NewListOffsetsResponseTopicPartition()
					p.Partition, p.ErrorCode = rp.Partition, errTopicAuthorizationFailed
					p.Timestamp, p.Offset = -1, -1
					t.Partitions = append(t.Partitions, p)
				}
				resp.Topics = append(resp.Topics, t)
			}
		})
}

// authorizeOffsetForLeaderEpoch: a follower's (replica id ≥ 0) needs
// ClusterAction on the cluster; a consumer's Describe on each topic.
func authorizeOffsetForLeaderEpoch(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.OffsetForLeaderEpochRequest)
	follower := req.Version >= 3 && req.ReplicaID >= 0
	clusterDenied := follower && !c.allowed(acl.OpClusterAction, acl.Cluster())
	code := errTopicAuthorizationFailed
	if clusterDenied {
		code = errClusterAuthorizationFailed
	}
	denied := func(t *kmsg.OffsetForLeaderEpochRequestTopic) bool {
		if follower {
			return clusterDenied
		}
		return !c.allowed(acl.OpDescribe, acl.Topic(t.Topic))
	}
	return guard(ctx, c, req, &req.Topics, denied, answerEmpty, next,
		func(resp *kmsg.OffsetForLeaderEpochResponse, refused []kmsg.OffsetForLeaderEpochRequestTopic) {
			for _, rt := range refused {
				t := kmsg.NewOffsetForLeaderEpochResponseTopic()
				t.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					p.Partition, p.ErrorCode = rp.Partition, code
					p.LeaderEpoch, p.EndOffset = -1, -1
					t.Partitions = append(t.Partitions, p)
				}
				resp.Topics = append(resp.Topics, t)
			}
		})
}

// authorizeMetadata: Describe on each topic. Asked for every topic, the
// client is told of those it may describe; asked for some, those it may
// not are answered TOPIC_AUTHORIZATION_FAILED (whether or not they
// exist), and a topic to auto-create also needs Create on the cluster or
// the topic. Authorized operations are filled when asked (v8+).
func authorizeMetadata(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.MetadataRequest)
	all := req.Topics == nil || req.Version == 0 && len(req.Topics) == 0
	autoCreate := c.s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	var refused []kmsg.MetadataRequestTopic
	if !all {
		mayCreate := autoCreate && c.allowed(acl.OpCreate, acl.Cluster())
		req.Topics, refused = split(req.Topics, func(t *kmsg.MetadataRequestTopic) bool {
			name, ok := c.topicOf(derefString(t.Topic), t.TopicID, t.Topic == nil)
			if !ok {
				return false // an unknown id: the handler answers it
			}
			if !c.allowed(acl.OpDescribe, acl.Topic(name)) {
				return true
			}
			if autoCreate && !mayCreate && log.ValidTopicName(name) == nil {
				if _, err := c.s.b.Partitions(ctx, name); errors.Is(err, log.ErrUnknownTopic) {
					return !c.allowed(acl.OpCreate, acl.Topic(name))
				}
			}
			return false
		})
	}
	var rep reply
	if !all && len(req.Topics) == 0 {
		// Every topic asked was refused: the handler, given none, would
		// answer every topic (v0's empty list means all).
		resp := kmsg.NewPtrMetadataResponse()
		resp.Brokers, resp.ControllerID = c.s.clusterBrokers()
		resp.ClusterID = &c.s.cfg.ClusterID
		rep = reply{resp: resp}
	} else {
		rep = next(ctx, c, req)
	}
	resp := rep.resp.(*kmsg.MetadataResponse)
	if all {
		kept := resp.Topics[:0]
		for _, t := range resp.Topics {
			if c.allowed(acl.OpDescribe, acl.Topic(derefString(t.Topic))) {
				kept = append(kept, t)
			}
		}
		resp.Topics = kept
	}
	for _, rt := range refused {
		// Asked by id, the name (nil) is not told.
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = rt.Topic, rt.TopicID, errTopicAuthorizationFailed
		resp.Topics = append(resp.Topics, t)
	}
	if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			if t := &resp.Topics[i]; t.ErrorCode == errNone && t.Topic != nil {
				t.AuthorizedOperations = c.authorizedOps(acl.Topic(*t.Topic), topicOps)
			}
		}
	}
	if req.Version >= 8 && req.Version <= 10 && req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = c.authorizedOps(acl.Cluster(), clusterOps)
	}
	return rep
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// authorizeDescribeCluster: Describe on the cluster.
func authorizeDescribeCluster(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.DescribeClusterRequest)
	if !c.allowed(acl.OpDescribe, acl.Cluster()) {
		resp := kmsg.NewPtrDescribeClusterResponse()
		resp.ErrorCode = errClusterAuthorizationFailed
		return reply{resp: resp}
	}
	rep := next(ctx, c, req)
	if resp, ok := rep.resp.(*kmsg.DescribeClusterResponse); ok && req.IncludeClusterAuthorizedOperations && resp.ErrorCode == errNone {
		resp.ClusterAuthorizedOperations = c.authorizedOps(acl.Cluster(), clusterOps)
	}
	return rep
}

// authorizeInitProducerID: Write on the transactional id; without one
// (an idempotent producer) IdempotentWrite on the cluster or Write on
// some topic (Kafka 3+).
func authorizeInitProducerID(ctx context.Context, c *conn, r kmsg.Request, next handler) reply {
	req := r.(*kmsg.InitProducerIDRequest)
	code := errNone
	switch {
	case req.TransactionalID != nil:
		if !c.allowed(acl.OpWrite, acl.TransactionalID(*req.TransactionalID)) {
			code = errTransactionalIDAuthorizationFailed
		}
	case !c.allowed(acl.OpIdempotentWrite, acl.Cluster()) && !c.allowedAny(acl.OpWrite, acl.ResourceTopic):
		code = errClusterAuthorizationFailed
	}
	if code == errNone {
		return next(ctx, c, req)
	}
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.ErrorCode = code
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	return reply{resp: resp}
}
