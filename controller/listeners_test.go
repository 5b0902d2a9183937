package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A broker registered with client listeners keeps them through an entry
// and a snapshot; a registration without any encodes exactly as before
// listeners existed, and such bytes (written by an older member) decode.
func TestRegisterBrokerListenersRecord(t *testing.T) {
	with := registerBrokerRecord{ID: 2, Epoch: 7, Addr: "10.0.0.2:9092", Listeners: []Endpoint{
		{Name: "CLIENT", Addr: "broker2.example.com:9094"}, {Name: "EXTERNAL", Addr: "203.0.113.2:9095"},
	}}
	b := encodeEntry(nil, []record{with})
	require.Equal(t, byte(typeRegisterBrokerListeners), b[2])
	got, err := decodeEntry(b)
	require.NoError(t, err)
	require.Equal(t, []record{with}, got)

	// The old layout: format 1, one record, type 1, ID 1, epoch 1, "b1".
	old := []byte{entryFormat, 1, byte(typeRegisterBroker), 2, 2, 2, 'b', '1'}
	got, err = decodeEntry(old)
	require.NoError(t, err)
	require.Equal(t, []record{registerBrokerRecord{ID: 1, Epoch: 1, Addr: "b1"}}, got)
	require.Equal(t, old, encodeEntry(nil, got), "no listeners: the old bytes")
	img := build(t, got...)
	bi, _ := img.Broker(1)
	require.Nil(t, bi.Listeners)
	_, ok := bi.Listener("CLIENT")
	require.False(t, ok)

	img = build(t, with)
	img.version = 3
	snap := encodeSnapshot(nil, img)
	back, err := decodeSnapshot(snap)
	require.NoError(t, err)
	bi, ok = back.Broker(2)
	require.True(t, ok)
	require.Equal(t, with.Listeners, bi.Listeners)
	addr, ok := bi.Listener("EXTERNAL")
	require.True(t, ok)
	require.Equal(t, "203.0.113.2:9095", addr)
	require.Equal(t, snap, encodeSnapshot(nil, back))

	// A listeners record must hold at least one (else the type-1 layout is
	// the one encoding): zero is corrupt, as is one cut short.
	zero := []byte{entryFormat, 1, byte(typeRegisterBrokerListeners), 2, 2, 2, 'b', '1', 0}
	_, err = decodeEntry(zero)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = decodeEntry(b[:len(b)-2])
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestDecideRegisterBrokerListeners(t *testing.T) {
	img := build(t, liveBrokerRecords(1)...)
	l := []Endpoint{{Name: "CLIENT", Addr: "c2:9094"}}
	got, err := decideRegisterBroker(img, BrokerRegistration{ID: 2, Addr: "b2", Listeners: l})
	require.NoError(t, err)
	require.Equal(t, []record{registerBrokerRecord{ID: 2, Epoch: 2, Addr: "b2", Listeners: l}}, got)
	l[0].Addr = "changed" // the record does not share the caller's slice
	require.Equal(t, "c2:9094", got[0].(registerBrokerRecord).Listeners[0].Addr)
	applyAll(t, img, got)
	bi, _ := img.Broker(2)
	addr, ok := bi.Listener("CLIENT")
	require.True(t, ok)
	require.Equal(t, "c2:9094", addr)

	// Registering again replaces the listeners (none now).
	got, err = decideRegisterBroker(img, BrokerRegistration{ID: 2, Addr: "b2"})
	require.NoError(t, err)
	applyAll(t, img, got)
	bi, _ = img.Broker(2)
	require.Nil(t, bi.Listeners)

	before := img.Version()
	for _, reg := range []BrokerRegistration{
		{ID: 3, Addr: "b3", Listeners: []Endpoint{{Name: "", Addr: "x:1"}}},
		{ID: 3, Addr: "b3", Listeners: []Endpoint{{Name: "CLIENT", Addr: ""}}},
		{ID: 3, Addr: "b3", Listeners: []Endpoint{{Name: "CLIENT", Addr: "x:1"}, {Name: "CLIENT", Addr: "y:1"}}},
	} {
		recs, err := decideRegisterBroker(img, reg)
		require.ErrorIs(t, err, ErrInvalidRequest, "%+v", reg)
		require.Nil(t, recs)
	}
	require.Equal(t, before, img.Version())
	_, ok = img.Broker(3)
	require.False(t, ok)
}
