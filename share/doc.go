// Package share is Strata's share groups (Kafka's KIP-932, queues): a
// group whose members share the records of its topics' partitions, each
// record handed to one member at a time and acknowledged one by one, with
// redelivery when a member releases it or its lock expires, and a
// delivery count that stops a poison record being redelivered forever.
//
// # Share-partitions
//
// A share group keeps, for each partition of a topic it consumes, a
// share-partition: the share-partition start offset (SPSO) before which
// every record is done with, and the in-flight records from it, each in
// one of the states Available, Acquired, Acknowledged and Archived (Kafka's
// RecordState, numbered as Kafka numbers them) with a delivery count.
//
// A fetch acquires records for a member: the Available in-flight records
// first, then records not delivered yet, at most the number asked for and
// while fewer than PartitionConfig.MaxInFlight records are in flight
// (group.share.partition.max.record.locks, 2000). Each acquisition adds one
// to the record's delivery count and locks it for the member for
// PartitionConfig.LockDuration (share.record.lock.duration.ms, 30 s). The
// member acknowledges each record: AckAccept (Acknowledged), AckRelease
// (Available again, for any member), AckReject (Archived), AckGap (an
// offset with no record: Archived) or AckRenew (the lock starts anew,
// KIP-1222). A lock that expires, or a member that leaves, releases the
// record; a release of a record delivered DeliveryCountLimit times
// (share.delivery.count.limit, 5) archives it instead. An acknowledgement
// of a record the member does not hold is refused with
// ErrInvalidRecordState, and nothing of that partition's acknowledgement
// applies. The start offset moves past Acknowledged and Archived records,
// and to the log's start offset when retention or DeleteRecords moves it
// past. A share-partition with no state starts at the log's end
// (share.auto.offset.reset=latest, Kafka's default) or at its start
// (earliest).
//
// # Members
//
// A member joins with Heartbeat (Kafka's ShareGroupHeartbeat) at epoch 0,
// with its own member id and the topics it subscribes to, and heartbeats
// within SessionTimeout (group.share.session.timeout.ms, 45 s) at the
// epoch it was given. Every partition of a subscribed topic is assigned to
// at least one member (the simple assignor: one member per partition while
// there are enough partitions, else partitions shared); a share group
// revokes nothing, so a member takes a new assignment at once. A member
// that leaves (epoch -1) or times out gives back the records it holds.
//
// # Use
//
// A broker (log.Broker) owns one Coordinator, made with Open over a
// StateLog: the internal topic __share_group_state, which Open replays and
// every change of a share-partition is written to before it is answered,
// as Kafka's ShareSnapshot and ShareUpdate records (records.go): a
// snapshot of the share-partition every SnapshotEvery updates, and of one
// left idle every ColdSnapshotInterval, so that replay stays short and a
// StatePruner can drop what every latest snapshot made obsolete. A fetch
// calls Acquire for each partition and reads the acquired offsets from the
// log; the member acknowledges with Acknowledge. Describe, List, Offsets,
// AlterOffsets, DeleteOffsets and DeleteGroup are the admin side;
// SetGroupConfig sets a group's share.* configs. Time comes from a
// clock.Clock, so tests run in virtual time.
//
// Delivery is at least once: a record acquired by a member that dies is
// delivered again once its lock expires; a record accepted is never
// delivered again.
package share
