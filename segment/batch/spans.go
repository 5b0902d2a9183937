package batch

import "math"

// A Span says where one record of a batch is, as the Builder that built the
// batch wrote it: the index of its value's first byte in the batch, the
// lengths of its key and value (-1 for null; the key ends where the value's
// length varint starts) and its timestamp delta. An Iter given a batch's
// spans (ResetSpans) takes each record from its span instead of parsing the
// record, and so never reads the records' bytes: what a reader in the
// process that built the batch saves (log's tail). Reading the record
// framing of a 1 MB batch that another core just wrote was a cache miss per
// record: 7% of the CPU of producing and consuming 1 KiB records.
type Span struct {
	Value    uint32
	ValueLen int32
	KeyLen   int32
	TSDelta  int32
}

// SetSpans makes the Builder record the Span of each record it appends,
// from the next Reset on and across Reset, until changed; or stop, at once.
// Spans returns them.
func (bd *Builder) SetSpans(on bool) {
	bd.spanning = on
	if !on {
		bd.spansOK = false
	}
}

// Spans returns the spans of the records of the batch the last Bytes
// returned, one per record in order, or nil if the Builder was not
// recording them (SetSpans) or a record has none: one with headers, or a
// timestamp delta beyond ±2³¹ ms. A compressed batch has none either: its
// readers decompress it. The slice is the batch's, handed over with it by
// Detach: it is never written to again after Detach.
func (bd *Builder) Spans() []Span {
	if !bd.spansOK || bd.codec != CompressionNone || len(bd.spans) != int(bd.n) {
		return nil
	}
	return bd.spans[:len(bd.spans):len(bd.spans)]
}

// startSpans begins the spans of a new batch, sized for as many records as
// the last batch had.
func (bd *Builder) startSpans() {
	bd.spansOK = bd.spanning && bd.codec == CompressionNone
	if !bd.spansOK {
		return
	}
	if bd.spans == nil && bd.lastN > 0 {
		bd.spans = make([]Span, 0, bd.lastN)
	}
	bd.spans = bd.spans[:0]
}

// addSpan records the span of the record just appended, whose value ends
// at end in the batch.
func (bd *Builder) addSpan(end int, tsDelta int64, key, value []byte, headers []RecordHeader) {
	if len(headers) > 0 || tsDelta < math.MinInt32 || tsDelta > math.MaxInt32 {
		bd.spansOK = false
		return
	}
	s := Span{Value: uint32(end - len(value)), ValueLen: -1, KeyLen: -1, TSDelta: int32(tsDelta)}
	if value != nil {
		s.ValueLen = int32(len(value))
	}
	if key != nil {
		s.KeyLen = int32(len(key))
	}
	bd.spans = append(bd.spans, s)
}

// ResetSpans is Reset for a batch with the spans of its records (Builder.Spans,
// one per record): Next takes each record from its span, without reading
// the record's bytes. The spans must be those the Builder gave with these
// very bytes, whose framing is known good (CheckFraming): only the spans'
// count is checked, and a span that reaches out of the batch is ErrCorrupt.
func (it *Iter) ResetSpans(b []byte, h Header, spans []Span) error {
	if err := it.Reset(b, h); err != nil {
		return err
	}
	if len(spans) != int(it.left) {
		it.left = 0
		return corruptf("%d spans for %d records", len(spans), h.NumRecords)
	}
	it.spans = spans
	return nil
}

// nextSpan is Next on a batch with spans: the record is the span's.
func (it *Iter) nextSpan(r *Record) (bool, error) {
	k := len(it.spans) - int(it.left)
	s := &it.spans[k]
	it.left--
	v := int(s.Value)
	kEnd := v - varintLen(int64(s.ValueLen))
	if v > len(it.b) || int(s.ValueLen) > len(it.b)-v || kEnd < HeaderSize || int(s.KeyLen) > kEnd-HeaderSize {
		it.left = 0
		return false, corruptf("record %d: span out of the batch", k)
	}
	r.Offset = it.h.BaseOffset + int64(k)
	if it.appendTime {
		r.Timestamp = it.h.MaxTimestamp
	} else {
		r.Timestamp = it.h.BaseTimestamp + int64(s.TSDelta)
	}
	r.Key, r.Value, r.Headers = nil, nil, nil
	if s.KeyLen >= 0 {
		r.Key = it.b[kEnd-int(s.KeyLen) : kEnd : kEnd]
	}
	if s.ValueLen >= 0 {
		end := v + int(s.ValueLen)
		r.Value = it.b[v:end:end]
	}
	return true, nil
}
