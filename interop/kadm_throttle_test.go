package interop

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/kafka/kafkatest"
)

// TestKadmThrottleConfigs: kadm's AlterBrokerConfigs and
// AlterTopicConfigs set the replication throttles of a cluster as Kafka's
// dynamic configs — on a broker (sent to it), on the cluster's default
// and on a topic — every member has them, DescribeBrokerConfigs and
// DescribeTopicConfigs show them with their sources, and the legacy
// AlterBrokerConfigsState replaces the cluster's default whole.
func TestKadmThrottleConfigs(t *testing.T) {
	c := startCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	adm := kadm.NewClient(newClusterKgo(t, c))
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "t"); err != nil {
		t.Fatal(err)
	}
	str := kadm.StringPtr
	check := func(what string, rs kadm.AlterConfigsResponses, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("%s: %s: %v %s", what, r.Name, r.Err, r.ErrMessage)
			}
		}
	}
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.replication.throttled.rate", Value: str("1048576")}}, 2)
	check("AlterBrokerConfigs broker 2", rs, err)
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "follower.replication.throttled.rate", Value: str("2097152")}})
	check("AlterBrokerConfigs cluster default", rs, err)
	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "leader.replication.throttled.replicas", Value: str("0:1,0:2")},
		{Op: kadm.AppendConfig, Name: "follower.replication.throttled.replicas", Value: str("0:3")},
	}, "t")
	check("AlterTopicConfigs", rs, err)
	c.waitImage("the throttles on every member", func(img *controller.Image) bool {
		tp, _ := img.Topic("t")
		return img.BrokerConfigs("2")["leader.replication.throttled.rate"] == "1048576" &&
			img.BrokerConfigs("")["follower.replication.throttled.rate"] == "2097152" &&
			tp.Configs["leader.replication.throttled.replicas"] == "0:1,0:2" &&
			tp.Configs["follower.replication.throttled.replicas"] == "0:3"
	})

	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.replication.throttled.rate", Value: str("fast")}}, 2)
	if err == nil && (len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig)) {
		t.Errorf("a bad rate: %+v, want INVALID_CONFIG", rs)
	}

	find := func(rcs kadm.ResourceConfigs, name string) (kadm.Config, bool) {
		for _, r := range rcs {
			for _, kv := range r.Configs {
				if kv.Key == name {
					return kv, true
				}
			}
		}
		return kadm.Config{}, false
	}
	bc, err := adm.DescribeBrokerConfigs(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if kv, ok := find(bc, "leader.replication.throttled.rate"); !ok || kv.MaybeValue() != "1048576" || kv.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("broker 2's leader rate: %+v (found %v)", kv, ok)
	}
	if kv, ok := find(bc, "follower.replication.throttled.rate"); !ok || kv.MaybeValue() != "2097152" || kv.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("broker 2's follower rate: %+v (found %v)", kv, ok)
	}
	tc, err := adm.DescribeTopicConfigs(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if kv, ok := find(tc, "leader.replication.throttled.replicas"); !ok || kv.MaybeValue() != "0:1,0:2" || kv.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("t's leader throttled replicas: %+v (found %v)", kv, ok)
	}

	// The legacy AlterConfigs replaces the cluster's default set whole.
	rs, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "leader.replication.throttled.rate", Value: str("4096")}})
	check("AlterBrokerConfigsState", rs, err)
	c.waitImage("the cluster's default replaced", func(img *controller.Image) bool {
		d := img.BrokerConfigs("")
		return len(d) == 1 && d["leader.replication.throttled.rate"] == "4096"
	})
}

// TestKadmThrottleConfigsStandalone: a standalone broker replicates
// nothing and refuses the throttles (INVALID_CONFIG), keeping its other
// dynamic broker configs.
func TestKadmThrottleConfigsStandalone(t *testing.T) {
	c := kafkatest.New(t, kafkatest.Topic("t", 1))
	ctx := testCtx(t, 15*time.Second)
	adm := newKadm(t, c.Addr())
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "leader.replication.throttled.rate", Value: kadm.StringPtr("1000")}})
	if err == nil && (len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig)) {
		t.Errorf("a throttle on a standalone broker: %+v, want INVALID_CONFIG", rs)
	}
}
