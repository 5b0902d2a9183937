package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/wire"
)

// nullKafka is a Kafka-protocol responder that stores nothing: the least
// any server can do for a kgo client, so that kgo against it bounds what
// any server reaches with kgo as the client. It answers ApiVersions,
// Metadata (one broker, itself; every topic asked for has one partition),
// InitProducerId, ListOffsets, Produce (acknowledged with offsets that
// count the records it was sent, which it drops) and Fetch (the largest
// batch it was ever sent, copied at consecutive offsets from the one asked
// for up to the partition's maximum bytes and about the records produced;
// past them it waits for MaxWait). One goroutine per connection, requests
// answered in order; every goroutine is joined by close.
type nullKafka struct {
	ln   net.Listener
	addr string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	next   int64         // the offset the next produced record gets
	batch  []byte        // the largest batch produced (a copy), served by Fetch
	done   chan struct{} // closed by close: parked fetches return
	wg     sync.WaitGroup
}

// nullServer starts a nullKafka on 127.0.0.1 for the kgo cases.
func nullServer(*env) (*kafkaServer, error) {
	s, err := startNullKafka()
	if err != nil {
		return nil, err
	}
	return &kafkaServer{addr: s.addr, close: s.close}, nil
}

func startNullKafka() (*nullKafka, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &nullKafka{ln: ln, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *nullKafka) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return // closed (a benchmark's listener has no other error to wait out)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(nc)
	}
}

// close stops the listener and every connection and waits for their
// goroutines.
func (s *nullKafka) close() {
	s.mu.Lock()
	s.closed = true
	close(s.done)
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// serve answers one connection's requests in order until it closes or
// sends something the responder does not know.
func (s *nullKafka) serve(nc net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
		nc.Close()
	}()
	rd, wr := bufio.NewReaderSize(nc, 64<<10), bufio.NewWriterSize(nc, 64<<10)
	var frame, out, run []byte // run: the batch's copies a fetch sends, reused
	for {
		var size [4]byte
		if _, err := io.ReadFull(rd, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n > 100<<20 {
			return
		}
		if cap(frame) < int(n) {
			frame = make([]byte, n)
		}
		frame = frame[:n]
		if _, err := io.ReadFull(rd, frame); err != nil {
			return
		}
		var err error
		if out, err = s.answer(out[:0], frame, &run); err != nil {
			return
		}
		if _, err := wr.Write(out); err != nil {
			return
		}
		if rd.Buffered() == 0 { // nothing more read: send what is answered
			if err := wr.Flush(); err != nil {
				return
			}
		}
	}
}

var errNullUnsupported = errors.New("null kafka: unsupported request")

// nullMaxVersions caps what the responder advertises: Fetch stays below
// v13 (topic IDs instead of names), the rest at versions kgo and kmsg
// both speak.
var nullMaxVersions = map[int16]int16{
	kmsg.Produce.Int16():        9,
	kmsg.Fetch.Int16():          12,
	kmsg.ListOffsets.Int16():    7,
	kmsg.Metadata.Int16():       12,
	kmsg.ApiVersions.Int16():    -1, // all kmsg knows
	kmsg.InitProducerID.Int16(): 4,
}

// answer appends the response frame to the request frame to out; run is
// the connection's buffer for fetched copies.
func (s *nullKafka) answer(out, frame []byte, run *[]byte) ([]byte, error) {
	if len(frame) < 10 {
		return out, errNullUnsupported
	}
	key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
	corr := binary.BigEndian.Uint32(frame[4:])
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	body := frame[10:]
	if idLen > 0 {
		if idLen > len(body) {
			return out, errNullUnsupported
		}
		body = body[idLen:]
	}
	req := kmsg.RequestForKey(key)
	top, served := nullMaxVersions[key]
	if req == nil || !served {
		return out, fmt.Errorf("%w: key %d", errNullUnsupported, key)
	}
	if top < 0 || top > req.MaxVersion() {
		top = req.MaxVersion()
	}
	if version > top || version < 0 {
		if key != kmsg.ApiVersions.Int16() {
			return out, fmt.Errorf("%w: key %d version %d", errNullUnsupported, key, version)
		}
		// KIP-511: an ApiVersions too new is answered in v0 with
		// UNSUPPORTED_VERSION and the list, for the client to retry.
		resp := s.apiVersions()
		resp.ErrorCode = 35
		return appendNullResponse(out, corr, false, resp), nil
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		var ok bool
		if body, ok = wire.SkipTags(body); !ok {
			return out, errNullUnsupported
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return out, err
	}
	var resp kmsg.Response
	switch req := req.(type) {
	case *kmsg.ApiVersionsRequest:
		r := s.apiVersions()
		r.SetVersion(version)
		resp = r
	case *kmsg.MetadataRequest:
		resp = s.metadata(req)
	case *kmsg.InitProducerIDRequest:
		r := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		r.ProducerID, r.ProducerEpoch = 1, 0
		resp = r
	case *kmsg.ListOffsetsRequest:
		resp = s.listOffsets(req)
	case *kmsg.ProduceRequest:
		resp = s.produce(req)
	case *kmsg.FetchRequest:
		resp = s.fetch(req, run)
	}
	// ApiVersions answers with response header v0 at every version.
	flexible := resp.IsFlexible() && key != kmsg.ApiVersions.Int16()
	return appendNullResponse(out, corr, flexible, resp), nil
}

// appendNullResponse appends size, response header and body.
func appendNullResponse(out []byte, corr uint32, flexible bool, resp kmsg.Response) []byte {
	start := len(out)
	out = binary.BigEndian.AppendUint32(out, 0)
	out = binary.BigEndian.AppendUint32(out, corr)
	if flexible {
		out = append(out, 0) // no header tags
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out
}

func (s *nullKafka) apiVersions() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	for key, top := range nullMaxVersions {
		req := kmsg.RequestForKey(key)
		if top < 0 || top > req.MaxVersion() {
			top = req.MaxVersion()
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, 0, top
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

// metadata lists the responder as the only broker, leading partition 0 of
// each topic asked for (of "bench" when asked for all).
func (s *nullKafka) metadata(req *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	host, portStr, _ := net.SplitHostPort(s.addr)
	var port int32
	fmt.Sscan(portStr, &port)
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = 0, host, port
	resp.Brokers = append(resp.Brokers, b)
	resp.ControllerID = 0
	names := []string{"bench"}
	if req.Topics != nil {
		names = names[:0]
		for _, t := range req.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	for _, name := range names {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = kmsg.StringPtr(name)
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.LeaderEpoch = 0, 0, 0
		p.Replicas, p.ISR = []int32{0}, []int32{0}
		t.Partitions = append(t.Partitions, p)
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func (s *nullKafka) listOffsets(req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	s.mu.Lock()
	end := s.next
	s.mu.Unlock()
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.LeaderEpoch, p.Timestamp = rp.Partition, 0, -1
			p.Offset = 0            // earliest, and any timestamp: the records start at 0
			if rp.Timestamp == -1 { // latest
				p.Offset = end
			}
			p.OldStyleOffsets = []int64{p.Offset}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// Offsets in a v2 record batch's header.
const (
	batchLastOffsetDelta = 23
	batchHeaderLen       = 61
)

// produce acknowledges every partition's batches with the next offsets and
// keeps the largest batch for fetch.
func (s *nullKafka) produce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.LogAppendTime = rp.Partition, -1
			s.mu.Lock()
			p.BaseOffset = s.next
			for b := rp.Records; len(b) >= batchHeaderLen; {
				size := 12 + int(binary.BigEndian.Uint32(b[8:]))
				if size > len(b) {
					break
				}
				count := int64(binary.BigEndian.Uint32(b[batchLastOffsetDelta:])) + 1
				s.next += count
				if len(s.batch) < batchHeaderLen || count > int64(binary.BigEndian.Uint32(s.batch[batchLastOffsetDelta:]))+1 {
					s.batch = append([]byte(nil), b[:size]...) // never written again: fetch reads it unlocked
				}
				b = b[size:]
			}
			s.mu.Unlock()
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// fetch fills each partition asked for, up to its maximum bytes (at least
// one batch), with copies of the kept batch at consecutive offsets from the
// one asked for (the CRC does not cover the base offset); the high
// watermark is the end of the last.
func (s *nullKafka) fetch(req *kmsg.FetchRequest, run *[]byte) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	s.mu.Lock()
	batch, end := s.batch, s.next
	s.mu.Unlock()
	served := false
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.LogStartOffset = rp.Partition, 0
			p.HighWatermark = rp.FetchOffset
			if len(batch) >= batchHeaderLen && rp.FetchOffset < end {
				served = true
				count := int64(binary.BigEndian.Uint32(batch[batchLastOffsetDelta:])) + 1
				// Up to the records produced (give or take a batch), as
				// a server that kept them would: no more to decode.
				copies := max(1, min(int(rp.PartitionMaxBytes)/len(batch), int((end-rp.FetchOffset+count-1)/count)))
				// The copies are made once per connection; a fetch only
				// moves their base offsets (the response is encoded, so
				// the buffer free, before the next request is read).
				// (A batch is told from another by its header, CRC included.)
				if len(*run) < copies*len(batch) || !bytes.Equal((*run)[8:batchHeaderLen], batch[8:batchHeaderLen]) {
					*run = append((*run)[:0], bytes.Repeat(batch, copies)...)
				}
				b := (*run)[:copies*len(batch)]
				for i := range copies {
					binary.BigEndian.PutUint64(b[i*len(batch):], uint64(p.HighWatermark))
					p.HighWatermark += count
				}
				p.RecordBatches = b
			}
			p.LastStableOffset = p.HighWatermark
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if !served { // past the end: wait as a long poll would, or until close
		t := time.NewTimer(time.Duration(req.MaxWaitMillis) * time.Millisecond)
		select {
		case <-t.C:
		case <-s.done:
		}
		t.Stop()
	}
	return resp
}
