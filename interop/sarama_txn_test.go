package interop

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/strata-log/strata/kafka/kafkatest"
)

// TestSaramaTransactionalProducer: sarama's transactional producer
// against a Strata server commits and aborts transactions in turn; a
// read_committed sarama consumer reads exactly the committed messages, in
// order, and the partition has no transaction left open.
func TestSaramaTransactionalProducer(t *testing.T) {
	const topic = "sarama-txn"
	c := kafkatest.New(t, kafkatest.Topic(topic, 1))
	ctx := testCtx(t, 2*time.Minute)
	cfg := saramaConfig()
	cfg.Version = sarama.V2_5_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 5
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.ID = "sarama-etl"
	p, err := sarama.NewSyncProducer([]string{c.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var committed []string
	for txn := range 4 {
		if err := p.BeginTxn(); err != nil {
			t.Fatalf("begin %d: %v", txn, err)
		}
		for i := range 10 {
			v := fmt.Sprintf("t%d-%d", txn, i)
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("send in transaction %d: %v", txn, err)
			}
			if txn%2 == 0 {
				committed = append(committed, v)
			}
		}
		if txn%2 == 0 {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			t.Fatalf("end transaction %d: %v", txn, err)
		}
	}
	awaitStable(t, c.Broker(), topic, 0)
	if got := saramaReadCommitted(ctx, t, c.Addr(), topic, len(committed)); !slices.Equal(got, committed) {
		t.Fatalf("read_committed read %q, want %q", got, committed)
	}
}
