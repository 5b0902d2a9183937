package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigRecordsRoundTripApplyAndSnapshot(t *testing.T) {
	recs := append(liveBrokerRecords(1, 2),
		topicRecord{Name: "t", ID: tid, MinISR: 1, Configs: map[string]string{"a": "1"}},
		configRecord{Type: BrokerConfigs, Name: "", Key: "leader.replication.throttled.rate", Value: "100"},
		configRecord{Type: BrokerConfigs, Name: "2", Key: "leader.replication.throttled.rate", Value: "200"},
		configRecord{Type: BrokerConfigs, Name: "2", Key: "follower.replication.throttled.rate", Value: "300"},
		configRecord{Type: BrokerConfigs, Name: "2", Key: "follower.replication.throttled.rate", Remove: true},
		configRecord{Type: TopicConfigs, Name: "t", Key: "leader.replication.throttled.replicas", Value: "0:1"},
		configRecord{Type: TopicConfigs, Name: "t", Key: "a", Remove: true},
	)
	got, err := decodeEntry(encodeEntry(nil, recs))
	require.NoError(t, err)
	require.Equal(t, recs, got)
	img := build(t, got...)
	require.Equal(t, map[string]string{"leader.replication.throttled.rate": "100"}, img.BrokerConfigs(""))
	require.Equal(t, map[string]string{"leader.replication.throttled.rate": "200"}, img.BrokerConfigs("2"))
	require.Empty(t, img.BrokerConfigs("1"))
	v, ok := img.BrokerConfig(1, "leader.replication.throttled.rate")
	require.True(t, ok)
	require.Equal(t, "100", v, "broker 1 has the cluster's default")
	v, _ = img.BrokerConfig(2, "leader.replication.throttled.rate")
	require.Equal(t, "200", v, "broker 2 its own")
	_, ok = img.BrokerConfig(2, "follower.replication.throttled.rate")
	require.False(t, ok, "removed")
	tp, _ := img.Topic("t")
	require.Equal(t, map[string]string{"leader.replication.throttled.replicas": "0:1"}, tp.Configs)

	img.version = 9
	b := encodeSnapshot(nil, img)
	back, err := decodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, b, encodeSnapshot(nil, back))
	require.Equal(t, img.BrokerConfigs(""), back.BrokerConfigs(""))
	require.Equal(t, img.BrokerConfigs("2"), back.BrokerConfigs("2"))
	tb, _ := back.Topic("t")
	require.Equal(t, tp.Configs, tb.Configs)
}

func TestConfigRecordsRejectedWithoutChange(t *testing.T) {
	base := append(liveBrokerRecords(1), topicRecord{Name: "t", ID: tid, MinISR: 1},
		configRecord{Type: BrokerConfigs, Name: "1", Key: "k", Value: "v"})
	for _, r := range []configRecord{
		{Type: BrokerConfigs, Name: "1", Key: "k", Value: "v"},   // no change
		{Type: BrokerConfigs, Name: "1", Key: "x", Remove: true}, // not set
		{Type: BrokerConfigs, Name: "01", Key: "k", Value: "w"},  // not a broker id
		{Type: BrokerConfigs, Name: "-1", Key: "k", Value: "w"},
		{Type: TopicConfigs, Name: "nope", Key: "k", Value: "v"},
		{Type: TopicConfigs, Name: "t", Key: "", Value: "v"},
		{Type: 3, Name: "t", Key: "k", Value: "v"},
	} {
		img := build(t, base...)
		before := encodeSnapshot(nil, img)
		require.ErrorIs(t, img.apply(r), errInapplicable, "%+v", r)
		require.Equal(t, before, encodeSnapshot(nil, img), "%+v changed the image", r)
	}
	// Bad bytes: an unknown resource type, a removal with a value.
	for _, r := range []configRecord{{Type: 7, Name: "1", Key: "k"}, {Type: BrokerConfigs, Name: "1", Key: "k", Value: "v", Remove: true}} {
		_, err := decodeEntry(encodeEntry(nil, []record{r}))
		require.ErrorIs(t, err, ErrCorrupt, "%+v", r)
	}
}

func TestDecideAlterConfigs(t *testing.T) {
	img := build(t, append(liveBrokerRecords(1), topicRecord{Name: "t", ID: tid, MinISR: 1, Configs: map[string]string{"a": "1"}})...)
	recs, res := decideAlterConfigs(img, []ConfigAlteration{
		{Type: BrokerConfigs, Name: "", Set: map[string]string{"r": "5"}},
		{Type: BrokerConfigs, Name: "1", Set: map[string]string{"r": "6"}, Delete: []string{"gone"}},
		{Type: TopicConfigs, Name: "t", Set: map[string]string{"a": "1", "b": "2"}}, // a unchanged
		{Type: TopicConfigs, Name: "t", Delete: []string{"a", "a"}},                 // the same resource again
		{Type: TopicConfigs, Name: "u", Set: map[string]string{"b": "2"}},
		{Type: BrokerConfigs, Name: "x", Set: map[string]string{"r": "1"}},
		{Type: BrokerConfigs, Name: "1", Set: map[string]string{"r": "1"}, Delete: []string{"r"}},
		{Type: 8, Name: "t"},
	})
	require.Equal(t, []record{
		configRecord{Type: BrokerConfigs, Name: "", Key: "r", Value: "5"},
		configRecord{Type: BrokerConfigs, Name: "1", Key: "r", Value: "6"},
		configRecord{Type: TopicConfigs, Name: "t", Key: "b", Value: "2"},
		configRecord{Type: TopicConfigs, Name: "t", Key: "a", Remove: true},
	}, recs)
	for i := range 4 {
		require.Empty(t, res[i].Code, "alteration %d: %+v", i, res[i])
	}
	require.Equal(t, "unknown_topic", res[4].Code)
	require.Equal(t, "invalid_request", res[5].Code)
	require.Equal(t, "invalid_config", res[6].Code)
	require.Equal(t, "invalid_request", res[7].Code)
	applyAll(t, img, recs) // the decision applies to the image it was made on
	tp, _ := img.Topic("t")
	require.Equal(t, map[string]string{"b": "2"}, tp.Configs)
}
