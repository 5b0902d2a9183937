package log

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/strata-log/strata/vfs"
)

func quotaSet(t *testing.T, as ...QuotaAlteration) *QuotaSet {
	t.Helper()
	for _, a := range as {
		if err := a.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := (&QuotaSet{}).Alter(as)
	return s
}

func setQuota(e QuotaEntity, key string, v float64) QuotaAlteration {
	return QuotaAlteration{Entity: e, Ops: []QuotaOp{{Key: key, Value: v}}}
}

// TestQuotaLookupPrecedence sets a quota at every level of Kafka's order
// and removes them from the most specific down: each lookup finds the
// most specific level left.
func TestQuotaLookupPrecedence(t *testing.T) {
	u, c, ud, cd := QuotaNamed("alice"), QuotaNamed("app"), QuotaDefault(), QuotaDefault()
	levels := []QuotaEntity{
		{User: u, ClientID: c}, {User: u, ClientID: cd}, {User: u},
		{User: ud, ClientID: c}, {User: ud, ClientID: cd}, {User: ud},
		{ClientID: c}, {ClientID: cd},
	}
	var as []QuotaAlteration
	for i, e := range levels {
		as = append(as, setQuota(e, QuotaProducerByteRate, float64(100*(i+1))))
	}
	s := quotaSet(t, as...)
	for i, e := range levels {
		q, from, ok := s.Lookup(QuotaProducerByteRate, "alice", "app")
		if !ok || from != e || q != float64(100*(i+1)) {
			t.Fatalf("level %d (%v): got %v from %v (%v)", i, e, q, from, ok)
		}
		if _, _, ok := s.Lookup(QuotaConsumerByteRate, "alice", "app"); ok {
			t.Fatalf("a consumer quota found among producer quotas")
		}
		s, _ = s.Alter([]QuotaAlteration{{Entity: e, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Remove: true}}}})
	}
	if _, _, ok := s.Lookup(QuotaProducerByteRate, "alice", "app"); ok || s.Len() != 0 {
		t.Fatalf("all removed: %v", s.Entities())
	}

	// Another user and client id fall to the defaults, not to alice's.
	s = quotaSet(t, as[0], as[2], as[7])
	for _, tc := range []struct {
		user, client string
		want         float64
		ok           bool
	}{
		{"alice", "app", 100, true},
		{"alice", "other", 300, true},
		{"bob", "app", 800, true},
		{"bob", "", 800, true},
	} {
		q, _, ok := s.Lookup(QuotaProducerByteRate, tc.user, tc.client)
		if q != tc.want || ok != tc.ok {
			t.Errorf("%s/%s: %v %v, want %v", tc.user, tc.client, q, ok, tc.want)
		}
	}
	if _, _, ok := quotaSet(t, as[0]).Lookup(QuotaProducerByteRate, "bob", "app"); ok {
		t.Error("bob has alice's quota")
	}
}

func TestQuotaAlterationValidate(t *testing.T) {
	alice := QuotaEntity{User: QuotaNamed("alice")}
	for _, a := range []QuotaAlteration{
		{Entity: QuotaEntity{}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1}}},
		{Entity: alice, Ops: []QuotaOp{{Key: "request_percentage", Value: 1}}},
		{Entity: alice, Ops: []QuotaOp{{Key: "nope", Value: 1}}},
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 0}}},
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: -5}}},
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1.5}}},
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1}, {Key: QuotaProducerByteRate, Remove: true}}},
	} {
		if err := a.Validate(); !errors.Is(err, ErrInvalidQuota) {
			t.Errorf("%+v: %v, want ErrInvalidQuota", a, err)
		}
	}
}

func TestBrokerQuotasSurviveRestart(t *testing.T) {
	mem := vfs.NewMem()
	ctx := context.Background()
	b, err := Open("/data", Config{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	alice := QuotaEntity{User: QuotaNamed("alice"), ClientID: QuotaDefault()}
	clients := QuotaEntity{ClientID: QuotaDefault()}
	bad := QuotaAlteration{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: -1}}}
	// Only bad alterations: nothing changes, nothing is written.
	errs, err := b.AlterClientQuotas(ctx, []QuotaAlteration{bad}, false)
	if err != nil || !errors.Is(errs[0], ErrInvalidQuota) || b.ClientQuotas().Len() != 0 {
		t.Fatalf("bad alteration: %v %v %v", errs, err, b.ClientQuotas().Entities())
	}
	if _, err := mem.Stat("/data/" + quotasFile); err == nil {
		t.Fatal("a bad alteration wrote the file")
	}
	// Validate only: checked, not applied.
	errs, err = b.AlterClientQuotas(ctx, []QuotaAlteration{setQuota(alice, QuotaProducerByteRate, 1024)}, true)
	if err != nil || errs[0] != nil || b.ClientQuotas().Len() != 0 {
		t.Fatalf("validate only: %v %v %v", errs, err, b.ClientQuotas().Entities())
	}
	errs, err = b.AlterClientQuotas(ctx, []QuotaAlteration{
		setQuota(alice, QuotaProducerByteRate, 1024), bad, setQuota(clients, QuotaConsumerByteRate, 4096),
	}, false)
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrInvalidQuota) || errs[2] != nil {
		t.Fatalf("AlterClientQuotas: %v %v", errs, err)
	}
	want := map[QuotaEntity]map[string]float64{
		alice: {QuotaProducerByteRate: 1024}, clients: {QuotaConsumerByteRate: 4096},
	}
	check := func(s *QuotaSet) {
		t.Helper()
		got := map[QuotaEntity]map[string]float64{}
		for _, e := range s.Entities() {
			got[e] = s.Quotas(e)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("quotas %v, want %v", got, want)
		}
	}
	check(b.ClientQuotas())
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AlterClientQuotas(ctx, []QuotaAlteration{setQuota(alice, QuotaProducerByteRate, 1)}, false); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	// A crash right after, too: everything acknowledged was synced.
	for _, fs := range []*vfs.MemFS{mem, mem.CrashClone()} {
		b, err := Open("/data", Config{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		check(b.ClientQuotas())
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQuotaFileCorrupt(t *testing.T) {
	for _, data := range []string{"", "{", `{"version":2,"quotas":[]}`,
		`{"version":1,"quotas":[{"user":"a","quotas":{"producer_byte_rate":-1}}]}`,
		`{"version":1,"quotas":[{"user":"a","quotas":{"fly":1}}]}`,
		`{"version":1,"quotas":[{"quotas":{"producer_byte_rate":1}}]}`,
	} {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := vfs.WriteFileAtomic(mem, "/data/"+quotasFile, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if _, err := openQuotaStore(mem, "/data"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%q: %v, want ErrCorrupt", data, err)
		}
	}
}

// TestQuotaFileCrashAtEachOp crashes the file system at each operation of
// a change and fails each in turn: the file reopens to the old quotas or
// the new, the new once acknowledged; a failed change is not enforced.
func TestQuotaFileCrashAtEachOp(t *testing.T) {
	alice := QuotaEntity{User: QuotaNamed("alice")}
	first, second := setQuota(alice, QuotaProducerByteRate, 100), setQuota(alice, QuotaProducerByteRate, 200)
	value := func(t *testing.T, s *QuotaSet) float64 {
		t.Helper()
		return s.Quotas(alice)[QuotaProducerByteRate]
	}
	reopen := func(t *testing.T, fs vfs.FS) float64 {
		t.Helper()
		s, err := openQuotaStore(fs, "/data")
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		return value(t, s.set.Load())
	}
	fresh := func(t *testing.T) (*vfs.MemFS, *quotaStore) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		s, err := openQuotaStore(mem, "/data")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.alter([]QuotaAlteration{first}, false); err != nil {
			t.Fatal(err)
		}
		return mem, s
	}
	for k := 0; ; k++ {
		mem, s := fresh(t)
		var crashed *vfs.MemFS
		n := 0
		s.fs = vfs.WithErrors(mem, func(vfs.Op, string) error {
			if n == k {
				crashed = mem.CrashClone()
			}
			n++
			return nil
		})
		if _, err := s.alter([]QuotaAlteration{second}, false); err != nil {
			t.Fatal(err)
		}
		if crashed == nil {
			if k < 4 {
				t.Fatalf("a change took only %d operations", k)
			}
			return
		}
		if got := reopen(t, crashed); got != 100 && got != 200 {
			t.Fatalf("crash at op %d: %v", k, got)
		}
		if got := reopen(t, mem.CrashClone()); got != 200 {
			t.Fatalf("crash after the change was acknowledged (op %d): %v", k, got)
		}

		mem, s = fresh(t)
		s.fs = vfs.WithErrors(mem, vfs.FailAfter(k))
		if _, err := s.alter([]QuotaAlteration{second}, false); err == nil {
			t.Fatalf("op %d failed and the change succeeded", k)
		}
		if got := value(t, s.set.Load()); got != 100 {
			t.Fatalf("failed change (op %d) is enforced: %v", k, got)
		}
		if got := reopen(t, mem.CrashClone()); got != 100 && got != 200 {
			t.Fatalf("failed change (op %d), crash: %v", k, got)
		}
	}
}

// FuzzDecodeQuotas: quotas.json, whatever its bytes, decodes or fails,
// never panics; what it decodes encodes back to the same set.
func FuzzDecodeQuotas(f *testing.F) {
	f.Add([]byte(`{"version":1,"quotas":[{"user":"alice","clientId":"<default>","quotas":{"producer_byte_rate":1048576}}]}`))
	f.Add([]byte(`{"version":1,"quotas":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := decodeQuotas(data)
		if err != nil {
			return
		}
		again, err := decodeQuotas(encodeQuotas(set))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(set.Entities(), again.Entities()) {
			t.Fatalf("round trip: %v != %v", set.Entities(), again.Entities())
		}
		for _, e := range set.Entities() {
			if !reflect.DeepEqual(set.Quotas(e), again.Quotas(e)) {
				t.Fatalf("round trip of %v: %v != %v", e, set.Quotas(e), again.Quotas(e))
			}
		}
	})
}
