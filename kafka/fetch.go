package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"time"

	"github.com/strata-log/strata/log"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleFetch reads through the backend, which parks the fetch in its
// purgatory until MinBytes arrive or MaxWait passes. Fetch sessions
// (KIP-227) are declined: every response has session id 0, so clients
// send full fetches.
func handleFetch(ctx context.Context, c *conn, r kmsg.Request) reply {
	req := r.(*kmsg.FetchRequest)
	c.s.boundFetch(req)
	if rep, ok := handleReplicaBatches(ctx, c, req); ok {
		return rep
	}
	if rep, ok := handleReplicaFetch(ctx, c, req); ok {
		return rep
	}
	s := c.s
	byID := req.Version >= 13
	fr := log.FetchRequest{MinBytes: int(req.MinBytes), MaxBytes: int(req.MaxBytes)}
	if req.Version >= 4 && req.IsolationLevel == 1 {
		// READ_COMMITTED: below the last stable offset, with the aborted
		// transactions of what is read.
		fr.Isolation = log.FetchTxnCommitted
	}
	// Kafka answers at once for MaxWait 0 or MinBytes 0; the backend
	// treats zero as its default, so ask for the shortest wait instead.
	fr.MaxWait = time.Duration(req.MaxWaitMillis) * time.Millisecond
	if fr.MaxWait <= 0 || fr.MinBytes <= 0 {
		fr.MaxWait, fr.MinBytes = time.Nanosecond, 1
	}
	type slot struct {
		t, p int // the response topic and partition
		code int16
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	var slots []slot // one per requested partition
	var asked []int  // index in slots of each partition asked of the backend
	for i := range req.Topics {
		rt := &req.Topics[i]
		name := rt.Topic
		code := errNone
		if byID {
			var ok bool
			if name, ok = s.topicName(rt.TopicID); !ok {
				code = errUnknownTopicID
			}
		}
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			t.Partitions = append(t.Partitions, p)
			slots = append(slots, slot{t: i, p: j, code: code})
			if code == errNone {
				asked = append(asked, len(slots)-1)
				fr.Partitions = append(fr.Partitions, log.FetchPartition{
					TopicPartition: log.TopicPartition{Topic: name, Partition: int(rp.Partition)},
					Offset:         rp.FetchOffset,
					MaxBytes:       int(rp.PartitionMaxBytes), // ≥ 1: boundFetch
				})
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	var res log.FetchResponse
	var err error
	if len(fr.Partitions) > 0 {
		res, err = s.b.Fetch(ctx, fr)
		if err != nil && ctx.Err() != nil && !errors.Is(err, log.ErrClosed) {
			// The server is closing: answer with what there is now.
			fr.MaxWait = time.Nanosecond
			res, err = s.b.Fetch(context.Background(), fr)
		}
	}
	records := make([]fetched, len(slots))
	for k, si := range asked {
		sl := &slots[si]
		switch {
		case err != nil:
			sl.code = errorCode(err)
		case k < len(res.Partitions):
			fp := &res.Partitions[k]
			p := &resp.Topics[sl.t].Partitions[sl.p]
			sl.code = errorCode(fp.Err)
			if s.cfg.Metrics != nil && fp.Records.Len() > 0 {
				s.cfg.Metrics.Fetched(fp.Topic, fp.Records.Len(), false)
			}
			if fp.Err == nil || errors.Is(fp.Err, log.ErrOffsetOutOfRange) {
				p.HighWatermark, p.LastStableOffset, p.LogStartOffset = fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset
			}
			if len(fp.AbortedTransactions) > 0 {
				p.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(fp.AbortedTransactions))
				for k, a := range fp.AbortedTransactions {
					p.AbortedTransactions[k] = kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
				}
			}
			if rerr := c.take(&records[si], &fp.Records); rerr != nil {
				sl.code = errorCode(rerr)
			}
		default:
			sl.code = errUnknownServerError
		}
	}
	res.Release()
	for _, sl := range slots {
		resp.Topics[sl.t].Partitions[sl.p].ErrorCode = sl.code
	}
	return reply{resp: resp, records: records}
}

// boundFetch makes a fetch request one the server serves within its
// bounds, as Kafka does: a partition listed more than once is fetched once
// (the last entry's offset and bytes, in the place of the first), the
// response's bytes are at most Config.FetchMaxBytes (fetch.max.bytes; the
// whole of it for versions below 3, which have no MaxBytes, or a MaxBytes
// of 0 or less), and each partition's at most that too, at least 1 (the
// first partition with records returns a whole batch all the same).
func (s *Server) boundFetch(req *kmsg.FetchRequest) {
	mergeDuplicates(req)
	limit := int32(s.cfg.FetchMaxBytes)
	if req.Version < 3 || req.MaxBytes <= 0 {
		req.MaxBytes = limit
	}
	req.MaxBytes = min(req.MaxBytes, limit)
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			p := &req.Topics[i].Partitions[j]
			p.PartitionMaxBytes = max(1, min(p.PartitionMaxBytes, limit))
		}
	}
}

// fetchPartKey is a partition of a fetch request: by topic name below version
// 13, by topic id from it.
type fetchPartKey struct {
	topic     string
	id        [16]byte
	partition int32
}

func fetchKeyOf(byID bool, t *kmsg.FetchRequestTopic, partition int32) fetchPartKey {
	if byID {
		return fetchPartKey{id: t.TopicID, partition: partition}
	}
	return fetchPartKey{topic: t.Topic, partition: partition}
}

// mergeDuplicates folds the partitions that req lists more than once into
// one entry each, as Kafka does (its broker reads a fetch's partitions into
// a map): the entry stays where the partition first appears and takes the
// fields of its last one. A topic whose partitions are listed in several
// runs keeps them; only repeats go.
func mergeDuplicates(req *kmsg.FetchRequest) {
	byID := req.Version >= 13
	n := 0
	for i := range req.Topics {
		n += len(req.Topics[i].Partitions)
	}
	if n < 2 || !hasDuplicates(req, byID, n) {
		return
	}
	type at struct{ t, p int }
	where := make(map[fetchPartKey]at, n)
	var out []kmsg.FetchRequestTopic
	for i := range req.Topics {
		t := &req.Topics[i]
		for _, p := range t.Partitions {
			k := fetchKeyOf(byID, t, p.Partition)
			if w, ok := where[k]; ok {
				out[w.t].Partitions[w.p] = p
				continue
			}
			if len(out) == 0 || fetchKeyOf(byID, &out[len(out)-1], 0) != fetchKeyOf(byID, t, 0) {
				nt := *t
				nt.Partitions = nil
				out = append(out, nt)
			}
			last := &out[len(out)-1]
			last.Partitions = append(last.Partitions, p)
			where[k] = at{len(out) - 1, len(last.Partitions) - 1}
		}
	}
	req.Topics = out
}

// hasDuplicates reports whether req, of n partitions, lists one twice:
// without a map for the few partitions of most fetches.
func hasDuplicates(req *kmsg.FetchRequest, byID bool, n int) bool {
	if n <= 16 {
		var keys [16]fetchPartKey
		k := 0
		for i := range req.Topics {
			t := &req.Topics[i]
			for _, p := range t.Partitions {
				key := fetchKeyOf(byID, t, p.Partition)
				if slices.Contains(keys[:k], key) {
					return true
				}
				keys[k] = key
				k++
			}
		}
		return false
	}
	seen := make(map[fetchPartKey]struct{}, n)
	for i := range req.Topics {
		t := &req.Topics[i]
		for _, p := range t.Partitions {
			key := fetchKeyOf(byID, t, p.Partition)
			if _, ok := seen[key]; ok {
				return true
			}
			seen[key] = struct{}{}
		}
	}
	return false
}

// connCopyBytes bounds the record bytes that a connection's responses
// waiting to be written hold in memory: what take copies of small
// partitions (below sendfileMin), which one writev sends faster than a
// sendfile each. Past it, and for larger partitions, a response holds
// handles on the segment files, written with sendfile over TCP and in
// chunks of copyFile's buffer over TLS: never a whole response in memory.
const connCopyBytes = 4 << 20

// take moves b into f: the handle itself (b is then left empty, and the
// response's writing sends it from the segment files and releases it once
// sent), or, for a small partition within the connection's connCopyBytes, a copy of
// its bytes (b stays the caller's to release). Batches in memory (no file
// ranges) are taken as they are.
func (c *conn) take(f *fetched, b *log.Batches) error {
	n := b.Len()
	if b.NumRanges() > 0 && (n >= c.s.sendfileMin || !c.reserveCopy(n)) {
		f.b = *b
		*b = log.Batches{}
		return nil
	}
	mem, err := b.Bytes()
	if err != nil {
		if b.NumRanges() > 0 {
			c.copied.Add(-n)
		}
		return err
	}
	if b.NumRanges() > 0 {
		f.copied = n
	}
	f.mem = mem
	return nil
}

// reserveCopy reserves n bytes of the connection's connCopyBytes; false if
// they do not fit.
func (c *conn) reserveCopy(n int64) bool {
	for {
		held := c.copied.Load()
		if held+n > connCopyBytes {
			return false
		}
		if c.copied.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// ReplicaBatchesBackend is a ReplicaBackend that answers followers' Fetch
// requests with handles on the record batches rather than their bytes, so
// that the server sends them as it sends a consumer's: with sendfile from
// the segment files over TCP (16 KiB and more), copied otherwise. The
// server prefers it to FetchReplica.
type ReplicaBatchesBackend interface {
	ReplicaBackend
	// FetchReplicaBatches answers a follower's Fetch (request version
	// ≤ 12) as FetchReplica does, but with the records out of the
	// response: records[i] are those of the response's i-th partition, in
	// topic then partition order (fewer entries: the rest have none). The
	// server owns and releases every handle of records, error or not.
	FetchReplicaBatches(ctx context.Context, req *kmsg.FetchRequest) (resp *kmsg.FetchResponse, records []log.Batches, err error)
}

// handleReplicaBatches serves a follower's Fetch through a
// ReplicaBatchesBackend; ok false when the request is not one (a
// consumer's, or no such backend).
func handleReplicaBatches(ctx context.Context, c *conn, req *kmsg.FetchRequest) (reply, bool) {
	rb := c.s.caps.replicaBatches
	if rb == nil || req.ReplicaID < 0 || req.Version > 12 {
		return reply{}, false
	}
	resp, batches, err := rb.FetchReplicaBatches(ctx, req)
	defer func() {
		for i := range batches {
			batches[i].Release()
		}
	}()
	if err != nil {
		resp = req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = errorCode(err)
		return reply{resp: resp}, true
	}
	n := 0
	for i := range resp.Topics {
		n += len(resp.Topics[i].Partitions)
	}
	records := make([]fetched, n)
	k := 0
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if k < len(batches) {
				if rerr := c.take(&records[k], &batches[k]); rerr != nil {
					p := &resp.Topics[i].Partitions[j]
					p.ErrorCode = errorCode(rerr)
				}
			}
			k++
		}
	}
	return reply{resp: resp, records: records}, true
}

// fetched is one partition's records in a fetch response: bytes in memory,
// or a handle on the segment files that is sent with sendfile once the
// response is written, then released.
type fetched struct {
	mem    []byte
	b      log.Batches
	copied int64 // bytes of mem reserved of the connection's connCopyBytes
}

func (f *fetched) len() int64 {
	if f.mem != nil {
		return int64(len(f.mem))
	}
	return f.b.Len()
}

// fileAt is a handle whose bytes go before out[at] in a response.
type fileAt struct {
	at int
	b  log.Batches
}

// splicer encodes fetch responses with kmsg but leaves out the record
// bytes: the response is a list of buffers, kmsg-encoded framing between
// each partition's records, so that the records go to the socket as they
// are: the buffers with writev, the records of a handle with sendfile from
// the segment file (fileAt).
//
// Each partition with records is encoded with a placeholder of
// markerLen random bytes, drawn once per server, which is then found in
// the encoding (in partition order) and cut out along with its length
// prefix. Nothing a client sends can contain it but by chance.
type splicer struct {
	marker [markerLen]byte
}

const markerLen = 16

func newSplicer() *splicer {
	var sp splicer
	rand.Read(sp.marker[:])
	return &sp
}

// frame encodes resp, whose partitions in order have records (none: len
// 0), as a response frame to h: buffers, and the handles to send between
// them, which it owns (released if it panics; the caller releases them
// once written). The frame is encoded into dst[:0] and the buffers
// listed in out[:0] (either nil: new ones); enc is the encoding's buffer.
func (sp *splicer) frame(h header, resp *kmsg.FetchResponse, records []fetched, dst []byte, out net.Buffers) (_ net.Buffers, files []fileAt, enc []byte) {
	defer func() {
		if r := recover(); r != nil {
			for i := range records {
				records[i].b.Release()
			}
			panic(r)
		}
	}()
	k := 0
	spliced := false
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			if records[k].len() > 0 {
				p.RecordBatches = sp.marker[:]
				spliced = true
			} else {
				p.RecordBatches = []byte{} // empty, not null
			}
			k++
		}
	}
	resp.SetVersion(h.version)
	enc = appendResponse(dst[:0], h, resp)
	if !spliced {
		return append(out[:0], enc), nil, enc
	}
	flexible := resp.IsFlexible()
	prefix := 4
	if flexible {
		prefix = 1 // uvarint(markerLen+1)
	}
	out = slices.Grow(out[:0], 2*len(records)+1)
	rest := enc
	total := len(enc)
	for i := range records {
		rec := &records[i]
		n := rec.len()
		if n == 0 {
			continue
		}
		at := bytes.Index(rest, sp.marker[:])
		if at < prefix {
			panic("kafka: fetch response marker not found") // recovered: the connection closes
		}
		head := rest[:at-prefix]
		if flexible {
			head = binary.AppendUvarint(head, uint64(n)+1)
		} else {
			head = binary.BigEndian.AppendUint32(head, uint32(n))
		}
		// head grew over the old prefix and the marker, which are not
		// needed: at most 5 bytes over 1+markerLen or 4 over 4+markerLen.
		total += len(head) - (at + markerLen) + int(n)
		out = append(out, head)
		if rec.mem != nil {
			out = append(out, rec.mem)
		} else {
			files = append(files, fileAt{at: len(out), b: rec.b})
		}
		rest = rest[at+markerLen:]
	}
	out = append(out, rest)
	binary.BigEndian.PutUint32(out[0], uint32(total-4))
	return out, files, enc
}
