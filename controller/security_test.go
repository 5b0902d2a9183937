package controller

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
)

func readTopic(principal, topic string) acl.Binding {
	return acl.Binding{
		ResourceType: acl.ResourceTopic, ResourceName: topic, PatternType: acl.PatternLiteral,
		Principal: principal, Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow,
	}
}

func sampleCredential(b byte) log.SCRAMCredential {
	return log.SCRAMCredential{Salt: []byte{b, 1}, Iterations: 4096, StoredKey: []byte{b, 2}, ServerKey: []byte{b, 3}}
}

func sampleSecurityRecords() []record {
	alice := log.QuotaEntity{User: log.QuotaNamed("alice")}
	dflt := log.QuotaEntity{User: log.QuotaDefault(), ClientID: log.QuotaNamed("app")}
	return []record{
		aclRecord{Bindings: []acl.Binding{readTopic("User:alice", "orders"), readTopic("User:bob", "orders")}},
		removeACLRecord{Bindings: []acl.Binding{readTopic("User:bob", "orders")}},
		scramRecord{User: "alice", Mechanism: log.SCRAMSHA256, Credential: sampleCredential(1)},
		scramRecord{User: "alice", Mechanism: log.SCRAMSHA512, Credential: sampleCredential(2)},
		scramRecord{User: "bob", Mechanism: log.SCRAMSHA256, Credential: sampleCredential(3)},
		removeSCRAMRecord{User: "alice", Mechanism: log.SCRAMSHA256},
		quotaRecord{Entity: alice, Key: log.QuotaProducerByteRate, Value: 1 << 20},
		quotaRecord{Entity: dflt, Key: log.QuotaConsumerByteRate, Value: 5000},
		quotaRecord{Entity: alice, Key: log.QuotaConsumerByteRate, Value: 7},
		quotaRecord{Entity: alice, Key: log.QuotaConsumerByteRate, Remove: true},
	}
}

func TestSecurityRecordsRoundTripAndApply(t *testing.T) {
	recs := sampleSecurityRecords()
	got, err := decodeEntry(encodeEntry(nil, recs))
	require.NoError(t, err)
	require.Equal(t, recs, got)
	img := build(t, got...)

	require.Equal(t, []acl.Binding{readTopic("User:alice", "orders")}, img.ACLs().Bindings())
	_, ok := img.SCRAMCredential(log.SCRAMSHA256, "alice")
	require.False(t, ok, "removed")
	c, ok := img.SCRAMCredential(log.SCRAMSHA512, "alice")
	require.True(t, ok)
	require.Equal(t, sampleCredential(2), c)
	require.Equal(t, []log.SCRAMUser{
		{Name: "alice", Credentials: []log.SCRAMInfo{{Mechanism: log.SCRAMSHA512, Iterations: 4096}}},
		{Name: "bob", Credentials: []log.SCRAMInfo{{Mechanism: log.SCRAMSHA256, Iterations: 4096}}},
	}, img.SCRAMUsers())
	q, from, ok := img.ClientQuotas().Lookup(log.QuotaProducerByteRate, "alice", "x")
	require.True(t, ok)
	require.Equal(t, float64(1<<20), q)
	require.Equal(t, log.QuotaEntity{User: log.QuotaNamed("alice")}, from)
	_, _, ok = img.ClientQuotas().Lookup(log.QuotaConsumerByteRate, "alice", "x")
	require.False(t, ok, "alice's consumer quota was removed")
	q, _, ok = img.ClientQuotas().Lookup(log.QuotaConsumerByteRate, "carol", "app")
	require.True(t, ok)
	require.Equal(t, 5000.0, q)

	// A snapshot holds the same security metadata, and re-encodes the same.
	img.version = 7
	b := encodeSnapshot(nil, img)
	back, err := decodeSnapshot(b)
	require.NoError(t, err)
	require.Equal(t, b, encodeSnapshot(nil, back))
	require.Equal(t, img.ACLs().Bindings(), back.ACLs().Bindings())
	require.Equal(t, img.SCRAMUsers(), back.SCRAMUsers())
	c2, _ := back.SCRAMCredential(log.SCRAMSHA512, "alice")
	require.Equal(t, c, c2)
	require.Equal(t, img.ClientQuotas().Entities(), back.ClientQuotas().Entities())
	for _, e := range img.ClientQuotas().Entities() {
		require.Equal(t, img.ClientQuotas().Quotas(e), back.ClientQuotas().Quotas(e))
	}
	// An image without security metadata has none in its snapshot.
	empty := build(t, liveBrokerRecords(1)...)
	require.Empty(t, securityRecords(empty))
}

func TestSecurityRecordsRejectedWithoutChange(t *testing.T) {
	base := sampleSecurityRecords()
	bad := []record{
		aclRecord{Bindings: []acl.Binding{readTopic("User:alice", "orders")}}, // there already
		aclRecord{Bindings: []acl.Binding{readTopic("User:carol", "x"), readTopic("User:carol", "x")}},
		aclRecord{Bindings: []acl.Binding{{ResourceType: acl.ResourceTopic, ResourceName: "x"}}}, // invalid
		aclRecord{},
		removeACLRecord{Bindings: []acl.Binding{readTopic("User:bob", "orders")}}, // not there
		scramRecord{User: "carol", Mechanism: "SCRAM-SHA-1", Credential: sampleCredential(4)},
		scramRecord{User: "carol", Mechanism: log.SCRAMSHA256, Credential: log.SCRAMCredential{Iterations: 4096}},
		scramRecord{User: "", Mechanism: log.SCRAMSHA256, Credential: sampleCredential(4)},
		removeSCRAMRecord{User: "alice", Mechanism: log.SCRAMSHA256}, // removed already
		removeSCRAMRecord{User: "dave", Mechanism: log.SCRAMSHA512},
		quotaRecord{Entity: log.QuotaEntity{User: log.QuotaNamed("alice")}, Key: log.QuotaProducerByteRate, Value: 1 << 20}, // no change
		quotaRecord{Entity: log.QuotaEntity{User: log.QuotaNamed("alice")}, Key: "request_percentage", Value: 5},
		quotaRecord{Entity: log.QuotaEntity{User: log.QuotaNamed("alice")}, Key: log.QuotaProducerByteRate, Value: -1},
		quotaRecord{Entity: log.QuotaEntity{}, Key: log.QuotaProducerByteRate, Value: 1},
		quotaRecord{Entity: log.QuotaEntity{User: log.QuotaNamed("zed")}, Key: log.QuotaProducerByteRate, Remove: true},
	}
	for _, r := range bad {
		img := build(t, base...)
		before := encodeSnapshot(nil, img)
		require.ErrorIs(t, img.apply(r), errInapplicable, "%#v", r)
		require.Equal(t, before, encodeSnapshot(nil, img), "%#v changed the image", r)
	}
	corrupt := map[string][]byte{
		"acl without bindings": {entryFormat, 1, byte(typeACL), 0},
		"quota part 3":         {entryFormat, 1, byte(typeQuota), 3},
		"truncated float":      truncated(encodeEntry(nil, []record{base[6]}), 3),
	}
	for name, b := range corrupt {
		_, err := decodeEntry(b)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}
}

// A clone shares the security metadata until one of them changes it.
func TestSecurityCloneIsIndependent(t *testing.T) {
	img := build(t, sampleSecurityRecords()...)
	frozen := img.clone()
	before := encodeSnapshot(nil, frozen)
	applyAll(t, img, []record{
		scramRecord{User: "bob", Mechanism: log.SCRAMSHA512, Credential: sampleCredential(9)},
		removeSCRAMRecord{User: "alice", Mechanism: log.SCRAMSHA512},
		aclRecord{Bindings: []acl.Binding{readTopic("User:z", "z")}},
		quotaRecord{Entity: log.QuotaEntity{ClientID: log.QuotaDefault()}, Key: log.QuotaProducerByteRate, Value: 1},
	})
	require.Equal(t, before, encodeSnapshot(nil, frozen), "change leaked into the clone")
	require.NotEqual(t, before, encodeSnapshot(nil, img))
	_, ok := frozen.SCRAMCredential(log.SCRAMSHA512, "alice")
	require.True(t, ok)
}

func TestDecideCreateAndDeleteACLs(t *testing.T) {
	img := build(t, sampleSecurityRecords()...)
	invalid := acl.Binding{ResourceType: acl.ResourceCluster, ResourceName: "other", PatternType: acl.PatternLiteral,
		Principal: "User:x", Host: "*", Operation: acl.OpAlter, Permission: acl.PermissionAllow}
	recs, errs := decideCreateACLs(img, []acl.Binding{
		readTopic("User:alice", "orders"), // there already: no error, no record
		invalid,
		readTopic("User:carol", "orders"),
		readTopic("User:carol", "orders"), // twice in one request: once
	})
	require.Equal(t, []record{aclRecord{Bindings: []acl.Binding{readTopic("User:carol", "orders")}}}, recs)
	require.Equal(t, "", errs[0].Code)
	require.ErrorIs(t, errs[1].err(), acl.ErrInvalidBinding)
	require.NoError(t, errs[2].err())
	applyAll(t, img, recs)

	recs, _ = decideCreateACLs(img, []acl.Binding{readTopic("User:carol", "orders")})
	require.Empty(t, recs)

	name := "orders"
	carol := "User:carol"
	byName := acl.Filter{ResourceType: acl.ResourceTopic, ResourceName: &name, PatternType: acl.PatternLiteral, Operation: acl.OpAny, Permission: acl.PermissionAny}
	byCarol := acl.AnyFilter
	byCarol.Principal = &carol
	recs, deleted, err := decideDeleteACLs(img, []acl.Filter{byCarol, byName})
	require.NoError(t, err)
	require.Equal(t, [][]acl.Binding{
		{readTopic("User:carol", "orders")},
		{readTopic("User:alice", "orders"), readTopic("User:carol", "orders")},
	}, deleted)
	require.Len(t, recs, 1)
	require.Len(t, recs[0].(removeACLRecord).Bindings, 2, "carol's binding is removed once")
	applyAll(t, img, recs)
	require.Zero(t, img.ACLs().Len())

	recs, deleted, err = decideDeleteACLs(img, []acl.Filter{acl.AnyFilter})
	require.NoError(t, err)
	require.Empty(t, recs)
	require.Equal(t, [][]acl.Binding{nil}, deleted)
	_, _, err = decideDeleteACLs(img, []acl.Filter{{}})
	require.ErrorIs(t, err, acl.ErrInvalidFilter)
	require.ErrorIs(t, err, ErrInvalidRequest)
}

func TestDecideAlterSCRAM(t *testing.T) {
	img := build(t, sampleSecurityRecords()...) // alice: 512; bob: 256
	c := sampleCredential(5)
	short := sampleCredential(6)
	short.Iterations = 100
	recs, failed := decideAlterSCRAM(img, []log.SCRAMChange{
		{User: "alice", Mechanism: log.SCRAMSHA512},                 // delete
		{User: "alice", Mechanism: log.SCRAMSHA256, Credential: &c}, // upsert
		{User: "bob", Mechanism: log.SCRAMSHA512},                   // bob has no 512: bob fails whole
		{User: "bob", Mechanism: log.SCRAMSHA256, Credential: &c},   //
		{User: "carol", Mechanism: log.SCRAMSHA256, Credential: &short},
		{User: "dave", Mechanism: log.SCRAMSHA256, Credential: &c},
		{User: "dave", Mechanism: log.SCRAMSHA256}, // deleting what this request added
	})
	require.Len(t, failed, 2)
	require.ErrorIs(t, failed["bob"].err(), log.ErrSCRAMCredentialNotFound)
	require.ErrorIs(t, failed["carol"].err(), log.ErrInvalidSCRAMCredential)
	applyAll(t, img, recs)
	require.Equal(t, []log.SCRAMUser{
		{Name: "alice", Credentials: []log.SCRAMInfo{{Mechanism: log.SCRAMSHA256, Iterations: 4096}}},
		{Name: "bob", Credentials: []log.SCRAMInfo{{Mechanism: log.SCRAMSHA256, Iterations: 4096}}},
	}, img.SCRAMUsers())
	got, _ := img.SCRAMCredential(log.SCRAMSHA256, "bob")
	require.Equal(t, sampleCredential(3), got, "bob unchanged")
	got, _ = img.SCRAMCredential(log.SCRAMSHA256, "alice")
	require.True(t, bytes.Equal(c.StoredKey, got.StoredKey))
}

func TestDecideAlterQuotas(t *testing.T) {
	img := build(t, sampleSecurityRecords()...)
	alice := log.QuotaEntity{User: log.QuotaNamed("alice")}
	recs, errs := decideAlterQuotas(img, []log.QuotaAlteration{
		{Entity: alice, Ops: []log.QuotaOp{
			{Key: log.QuotaProducerByteRate, Value: 1 << 20}, // unchanged: no record
			{Key: log.QuotaConsumerByteRate, Remove: true},   // not set: no record
		}},
		{Entity: alice, Ops: []log.QuotaOp{{Key: "io_thread_units", Value: 1}}},
		{Entity: alice, Ops: []log.QuotaOp{{Key: log.QuotaProducerByteRate, Value: 2048}}},
		{Entity: alice, Ops: []log.QuotaOp{{Key: log.QuotaProducerByteRate, Remove: true}}}, // removes what the one before set
	})
	require.NoError(t, errs[0].err())
	require.ErrorIs(t, errs[1].err(), log.ErrInvalidQuota)
	require.Equal(t, []record{
		quotaRecord{Entity: alice, Key: log.QuotaProducerByteRate, Value: 2048},
		quotaRecord{Entity: alice, Key: log.QuotaProducerByteRate, Remove: true},
	}, recs)
	applyAll(t, img, recs)
	require.Nil(t, img.ClientQuotas().Quotas(alice))
}

func FuzzDecodeSecurityEntry(f *testing.F) {
	f.Add(encodeEntry(nil, sampleSecurityRecords()))
	for _, r := range sampleSecurityRecords() {
		f.Add(encodeEntry(nil, []record{r}))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := decodeEntry(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, b, encodeEntry(nil, recs))
		img := newImage()
		for _, r := range recs {
			before := encodeSnapshot(nil, img)
			if err := img.apply(r); err != nil {
				require.ErrorIs(t, err, errInapplicable)
				require.Equal(t, before, encodeSnapshot(nil, img))
			}
		}
		back, err := decodeSnapshot(encodeSnapshot(nil, img))
		require.NoError(t, err)
		require.Equal(t, img.ACLs().Bindings(), back.ACLs().Bindings())
		require.Equal(t, img.SCRAMUsers(), back.SCRAMUsers())
	})
}

func truncated(b []byte, n int) []byte { return b[:len(b)-n] }
