package batch

import "testing"

func TestSetProducer(t *testing.T) {
	var bd Builder
	bd.Append(1000, []byte("k"), []byte("v"), nil)
	bd.Append(1001, nil, []byte("w"), nil)
	b := bd.Bytes()
	SetProducer(b, 42, 7, 100)
	h, err := Validate(b)
	if err != nil {
		t.Fatalf("the batch is no longer valid: %v", err)
	}
	if h.ProducerID != 42 || h.ProducerEpoch != 7 || h.BaseSequence != 100 {
		t.Fatalf("producer fields %d/%d/%d, want 42/7/100", h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	// The same bytes as a Builder that had the fields from the start.
	var want Builder
	want.SetProducer(42, 7, 100)
	want.Append(1000, []byte("k"), []byte("v"), nil)
	want.Append(1001, nil, []byte("w"), nil)
	if w := want.Bytes(); string(w) != string(b) {
		t.Fatalf("SetProducer on a built batch differs from Builder.SetProducer")
	}
}
