package interop

import (
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	kgosasl "github.com/segmentio/kafka-go/sasl"
	kgplain "github.com/segmentio/kafka-go/sasl/plain"
	kgscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/kafka/kafkatest"
)

// saslFixture serves topic with PLAIN (alice) and SCRAM-SHA-256/512 (bob).
func saslFixture(t *testing.T, topic string) *kafkatest.Cluster {
	t.Helper()
	cred := func(mech string) kafka.SCRAMCredential {
		c, err := kafka.NewSCRAMCredential(mech, "bob-secret", 0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c256, c512 := cred("SCRAM-SHA-256"), cred("SCRAM-SHA-512")
	return kafkatest.New(t, kafkatest.Topic(topic, 2), kafkatest.WithServerConfig(kafka.Config{SASL: &kafka.SASLConfig{
		Plain: func(user string) (string, bool) { return "alice-secret", user == "alice" },
		SCRAM256: func(user string) (kafka.SCRAMCredential, bool) {
			return c256, user == "bob"
		},
		SCRAM512: func(user string) (kafka.SCRAMCredential, bool) {
			return c512, user == "bob"
		},
	}}))
}

// TestSASL: kgo (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), sarama (PLAIN) and
// kafka-go (PLAIN, SCRAM-SHA-512) authenticate and produce; a wrong
// password fails at once with SASL_AUTHENTICATION_FAILED.
func TestSASL(t *testing.T) {
	const topic = "secure"
	c := saslFixture(t, topic)
	var all []rec
	kgoMechs := []struct {
		name string
		mech sasl.Mechanism
	}{
		{"kgo-plain", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()},
		{"kgo-scram-256", scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()},
		{"kgo-scram-512", scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()},
	}
	for _, m := range kgoMechs {
		t.Run(m.name, func(t *testing.T) {
			ctx := testCtx(t, 10*time.Second)
			want := makeRecs(m.name, 10)
			kgoProduce(ctx, t, c.Addr(), topic, want, kgo.SASL(m.mech))
			all = append(all, want...)
		})
	}
	t.Run("kgo-wrong-password", func(t *testing.T) {
		ctx := testCtx(t, 10*time.Second)
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addr()), kgo.SASL(scram.Auth{User: "bob", Pass: "nope"}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})
	t.Run("sarama-plain", func(t *testing.T) {
		cfg := saramaConfig()
		cfg.Producer.Partitioner = sarama.NewMurmur2Partitioner
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-secret"
		cfg.Net.SASL.Handshake = true
		cfg.Net.SASL.Version = sarama.SASLHandshakeV1
		p, err := sarama.NewSyncProducer([]string{c.Addr()}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		want := makeRecs("sarama-plain", 10)
		if err := p.SendMessages(saramaMessages(topic, want)); err != nil {
			t.Fatal(err)
		}
		all = append(all, want...)
	})
	t.Run("sarama-wrong-password", func(t *testing.T) {
		cfg := saramaConfig()
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "nope"
		cfg.Net.SASL.Version = sarama.SASLHandshakeV1
		cfg.Metadata.Retry.Max = 0
		cl, err := sarama.NewClient([]string{c.Addr()}, cfg)
		if err == nil {
			cl.Close()
			t.Fatal("sarama authenticated with a wrong password")
		}
		if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
			t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	})
	kafkagoMechs := []struct {
		name string
		mech func() (kgosasl.Mechanism, error)
	}{
		{"kafka-go-plain", func() (kgosasl.Mechanism, error) {
			return kgplain.Mechanism{Username: "alice", Password: "alice-secret"}, nil
		}},
		{"kafka-go-scram-512", func() (kgosasl.Mechanism, error) { return kgscram.Mechanism(kgscram.SHA512, "bob", "bob-secret") }},
	}
	for _, m := range kafkagoMechs {
		t.Run(m.name, func(t *testing.T) {
			ctx := testCtx(t, 10*time.Second)
			mech, err := m.mech()
			if err != nil {
				t.Fatal(err)
			}
			w := &kafkago.Writer{Addr: kafkago.TCP(c.Addr()), Topic: topic, Balancer: kafkago.Murmur2Balancer{},
				BatchTimeout: 5 * time.Millisecond, RequiredAcks: kafkago.RequireAll, Transport: &kafkago.Transport{SASL: mech}}
			defer w.Close()
			want := makeRecs(m.name, 10)
			if err := w.WriteMessages(ctx, kafkagoMessages(want)...); err != nil {
				t.Fatal(err)
			}
			all = append(all, want...)
		})
	}
	checkStored(t, c, topic, all, nil)
}
