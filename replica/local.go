package replica

import (
	"context"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/replica/internal/transport"
)

// localMember is the member as a LocalNetwork calls it (Config.Local):
// the same pointer as its *Broker, so that it joins and leaves the network
// as one member.
type localMember Broker

var _ transport.Member = (*localMember)(nil)

func (m *localMember) b() *Broker { return (*Broker)(m) }

func (m *localMember) ID() int     { return m.cfg.ID }
func (m *localMember) Ready() bool { return m.b().isReady() }

func (m *localMember) ServeReplicaFetch(ctx context.Context, req transport.ReplicaFetchRequest) (transport.ReplicaFetchResponse, error) {
	return m.b().serveReplicaFetch(ctx, req)
}

func (m *localMember) ServeEpochEnd(req transport.EpochEndRequest) transport.EpochEndAnswer {
	return m.b().serveEpochEnd(req)
}

func (m *localMember) Produce(ctx context.Context, tp log.TopicPartition, batch []byte, acks log.Acks) (log.ProduceResult, error) {
	return m.b().produceLocal(ctx, tp, batch, acks)
}

func (m *localMember) Fetch(ctx context.Context, req log.FetchRequest) (log.FetchResponse, error) {
	return m.b().fetchLocal(ctx, req)
}

func (m *localMember) ListOffset(tp log.TopicPartition, at int64) (int64, error) {
	return m.b().listOffsetLocal(tp, at)
}

func (m *localMember) DeleteRecords(ctx context.Context, tp log.TopicPartition, offset int64) (int64, error) {
	return m.b().deleteRecordsLocal(ctx, tp, offset)
}

func (m *localMember) Group(call func(log.GroupClient) error) error { return m.b().groupLocal(call) }
