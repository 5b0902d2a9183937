// Package assign is the client side of Kafka's consumer protocol: what a
// group's leader member does with the members' subscriptions between
// JoinGroup and SyncGroup.
//
// The group coordinator (package group) treats a member's protocol metadata
// and assignment as opaque bytes. Kafka consumers (protocol type
// "consumer") fill them with ConsumerProtocol structures, which this package
// encodes and decodes with franz-go's kmsg:
//
//	metadata   (kmsg.ConsumerMemberMetadata)    version, topics, user data, ...
//	assignment (kmsg.ConsumerMemberAssignment)  version, [topic, [partition]], user data
//
// A Strata consumer joins with the protocol "range" and EncodeSubscription's
// metadata; the member the coordinator makes leader decodes every member's
// subscription (DecodeSubscription), runs Range over them and the topics'
// partition counts, and hands each member EncodeAssignment of its share in
// SyncGroup; each member reads its own with DecodeAssignment. Because these
// are Kafka's bytes and Kafka's RangeAssignor, a Strata consumer and a Kafka
// client (kgo, sarama, kafka-go) speaking "range" can share one group.
//
// # Server-side assignors (KIP-848)
//
// In the consumer group protocol the coordinator computes the assignment
// itself, with the assignor the members name: Uniform ("uniform", the
// default) spreads the partitions evenly and keeps what it can of each
// member's previous target; RangeServer ("range") gives each member
// contiguous ranges of every topic it subscribes to. Both take a Spec —
// the members with their subscriptions, racks and current assignments, and
// the topics' partition counts and replica racks — and return a
// Partitions (topic → sorted partitions) per member.
package assign
