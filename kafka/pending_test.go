package kafka

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/strata-log/strata/log/logtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Pending requests and their response buffers are recycled across
// requests and connections: with several connections each pipelining
// produces, metadata and fetches (large and small responses), every
// response still comes back whole, in request order, with its own
// correlation id and its own content.
func TestRecycledPendingsKeepResponses(t *testing.T) {
	s, _, _ := start(t, Config{}, logtest.Topic("t", 4))
	const conns, rounds = 4, 60
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for ci := range conns {
		c := dial(t, s.Addr())
		wg.Go(func() {
			var reqs []kmsg.Request
			var corrs []int32
			send := func(r kmsg.Request) { reqs, corrs = append(reqs, r), append(corrs, c.send(r)) }
			check := func() error {
				for k := range reqs {
					i := k / 2
					switch r := c.recv(reqs[k], corrs[k]).(type) {
					case *kmsg.ProduceResponse:
						p := r.Topics[0].Partitions[0]
						if p.ErrorCode != errNone || p.BaseOffset != int64(i) {
							return fmt.Errorf("conn %d produce %d: error %d, offset %d", ci, i, p.ErrorCode, p.BaseOffset)
						}
					case *kmsg.MetadataResponse:
						if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 4 {
							return fmt.Errorf("conn %d metadata %d: %d topics", ci, i, len(r.Topics))
						}
					case *kmsg.FetchResponse:
						p := r.Topics[0].Partitions[0]
						b := p.RecordBatches
						if p.ErrorCode != errNone || len(b) < 8 || int64(binary.BigEndian.Uint64(b)) != int64(i) || p.HighWatermark != rounds {
							return fmt.Errorf("conn %d fetch %d: error %d, %d bytes, hw %d", ci, i, p.ErrorCode, len(b), p.HighWatermark)
						}
					}
				}
				reqs, corrs = reqs[:0], corrs[:0]
				return nil
			}
			for i := range rounds {
				// A value large enough, now and then, for a response
				// buffer to be outgrown and dropped.
				val := fmt.Sprintf("c%d-%d", ci, i)
				if i%7 == 0 {
					val += string(make([]byte, 80<<10))
				}
				send(produceReq(9, 1, "t", int32(ci), records(val)))
				send(metadataV9())
			}
			if err := check(); err != nil {
				errs <- err
				return
			}
			for i := range rounds {
				send(fetchReq(12, "t", int32(ci), int64(i), 0))
				send(metadataV9())
			}
			if err := check(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
