package log_test

import (
	"context"
	"testing"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/metrics"
	"github.com/strata-log/strata/metrics/logmetrics"
)

// TestProducerOverLogmetricsTakesFastPath: a Producer whose Client is a
// logmetrics.Backend (a wrapping Client) sends its batches by the trusted
// path, through the Backend, as one on the bare *Broker does.
func TestProducerOverLogmetricsTakesFastPath(t *testing.T) {
	b := logtest.New(t, logtest.InMemory(), logtest.Topic("t", 1))
	be := logmetrics.NewBackend(b, metrics.NewRecorder())
	pr, err := log.NewProducer(be, log.ProducerConfig{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if got := log.ProducerBuiltPath(pr); got != log.BuiltProducer(be) {
		t.Fatalf("the Producer's trusted path is %T %p, want the Backend %p", got, got, be)
	}
	if _, err := pr.Send(context.Background(), log.Record{Topic: "t", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	// A Client that only embeds the Backend hides it: ProduceBatch.
	pr2, err := log.NewProducer(struct{ log.Client }{be}, log.ProducerConfig{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pr2.Close()
	if got := log.ProducerBuiltPath(pr2); got != nil {
		t.Fatalf("a Client hiding the capability got the trusted path %T", got)
	}
}
