package batch

// SetTransactional marks the batch being built as transactional (attribute
// bit 4, KIP-98) until the next Reset. The bit is in the header, which
// Bytes sums into the CRC: a transactional producer that sets it before
// Bytes does not sum the whole batch a second time (as flipping the bit in
// the finished bytes and calling SetCRC would). On a Builder that has not
// started a batch it starts one, as Bytes does: call it after the first
// Append.
func (bd *Builder) SetTransactional() {
	bd.init(0)
	bd.buf[offAttributes+1] |= attrTransactional
}
