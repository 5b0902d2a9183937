package kafka

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/leaktest"
	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/log/logtest"
	"github.com/strata-log/strata/metrics"
)

// signalHooks is a Recorder that also tells requests every API key
// reported, once its figures are in, and purgatory every purgatory size.
type signalHooks struct {
	*metrics.Recorder
	requests  chan int16
	purgatory chan int
}

func newSignalHooks() signalHooks {
	return signalHooks{metrics.NewRecorder(), make(chan int16, 16), make(chan int, 16)}
}

func (h signalHooks) RequestBytes(api int16, in, out int64) {
	h.Recorder.RequestBytes(api, in, out)
	h.requests <- api // Request is reported first
}

func (h signalHooks) Purgatory(name string, size int) {
	h.Recorder.Purgatory(name, size)
	h.purgatory <- size
}

func requestStats(t *testing.T, r *metrics.Recorder, api int16) metrics.RequestStats {
	t.Helper()
	for _, s := range r.Snapshot().Requests {
		if s.API == api {
			return s
		}
	}
	t.Fatalf("no requests of api %d", api)
	return metrics.RequestStats{}
}

func topicStats(r *metrics.Recorder, topic string) metrics.TopicStats {
	for _, s := range r.Snapshot().Topics {
		if s.Topic == topic {
			return s
		}
	}
	return metrics.TopicStats{}
}

// A scripted workload through the server: every request raises its API's
// count and latency count and adds its frames' bytes; produces add records
// and bytes in, fetches bytes out; a failed produce counts an error; a
// parked fetch raises the fetch purgatory's size until a produce wakes it.
func TestMetricsScriptedWorkload(t *testing.T) {
	leaktest.Check(t)
	h := newSignalHooks()
	s, _, _ := start(t, Config{Metrics: h}, logtest.Topic("orders", 1), logtest.WithConfig(log.Config{Metrics: h}))
	c := dial(t, s.Addr())

	// A produce of 3 records, acks=1.
	recs := records("a", "b", "c")
	req := produceReq(9, 1, "orders", 0, recs)
	c.corr++
	frame := c.f.AppendRequest(nil, req, c.corr)
	c.write(frame)
	resp, err := c.frame()
	require.NoError(t, err)
	require.Equal(t, produceKey, <-h.requests)
	st := requestStats(t, h.Recorder, produceKey)
	require.EqualValues(t, 1, st.Requests)
	require.EqualValues(t, 0, st.Errors)
	require.EqualValues(t, 1, st.Latency.Count)
	require.EqualValues(t, len(frame), st.RequestBytes, "the request frame, size prefix included")
	require.EqualValues(t, len(resp)+4, st.ResponseBytes, "the response frame, size prefix included")
	require.Equal(t, metrics.TopicStats{Topic: "orders", MessagesIn: 3, BytesIn: int64(len(recs))}, topicStats(h.Recorder, "orders"))

	// A produce to a topic that does not exist fails.
	c.do(produceReq(9, 1, "nope", 0, records("x")))
	require.Equal(t, produceKey, <-h.requests)
	st = requestStats(t, h.Recorder, produceKey)
	require.EqualValues(t, 2, st.Requests)
	require.EqualValues(t, 1, st.Errors)
	require.EqualValues(t, 3, topicStats(h.Recorder, "orders").MessagesIn, "nothing appended")

	// A fetch of what is there: bytes out.
	fr := c.do(fetchReq(12, "orders", 0, 0, 0)).(*kmsg.FetchResponse)
	require.Equal(t, fetchKey, <-h.requests)
	n := len(fr.Topics[0].Partitions[0].RecordBatches)
	require.Positive(t, n)
	require.EqualValues(t, n, topicStats(h.Recorder, "orders").BytesOut)
	require.EqualValues(t, 1, requestStats(t, h.Recorder, fetchKey).Requests)

	// A fetch past the end parks in the purgatory until a produce.
	c2 := dial(t, s.Addr())
	fetch := fetchReq(12, "orders", 0, 3, 30*time.Second)
	corr := c2.send(fetch)
	require.Equal(t, 1, <-h.purgatory, "parked")
	require.Equal(t, []metrics.PurgatoryStats{{Name: "Fetch", Size: 1}}, h.Snapshot().Purgatories)
	c.do(produceReq(9, 1, "orders", 0, records("d")))
	fr = c2.recv(fetch, corr).(*kmsg.FetchResponse)
	// The two connections' writers report in either order.
	require.ElementsMatch(t, []int16{produceKey, fetchKey}, []int16{<-h.requests, <-h.requests})
	require.Equal(t, 0, <-h.purgatory, "left")
	require.Equal(t, []metrics.PurgatoryStats{{Name: "Fetch", Size: 0}}, h.Snapshot().Purgatories)
	require.Positive(t, len(fr.Topics[0].Partitions[0].RecordBatches))
	require.EqualValues(t, 2, requestStats(t, h.Recorder, fetchKey).Requests)

	// acks=0: counted once appended, with no response bytes.
	before := requestStats(t, h.Recorder, produceKey)
	c.send(produceReq(9, 0, "orders", 0, records("e", "f")))
	require.Equal(t, produceKey, <-h.requests)
	st = requestStats(t, h.Recorder, produceKey)
	require.Equal(t, before.Requests+1, st.Requests)
	require.Equal(t, before.ResponseBytes, st.ResponseBytes)
	require.EqualValues(t, 6, topicStats(h.Recorder, "orders").MessagesIn)

	// Metadata is counted by its own name.
	c.do(kmsg.NewPtrMetadataRequest())
	require.Equal(t, metadataKey, <-h.requests)
	var sb strings.Builder
	require.NoError(t, h.Snapshot().WritePrometheus(&sb))
	for _, want := range []string{
		`kafka_network_requestmetrics_requests_total{request="Metadata"} 1`,
		`kafka_network_requestmetrics_totaltime_seconds_count{request="Produce"} 4`,
		`kafka_network_requestmetrics_errors_total{request="Produce"} 1`,
		`kafka_server_brokertopicmetrics_messagesin_total{topic="orders"} 6`,
		`kafka_server_delayedoperationpurgatory_purgatorysize{delayedoperation="Fetch"} 0`,
	} {
		require.Contains(t, sb.String(), want)
	}
}

// Without Config.Metrics nothing is reported and nothing breaks.
func TestMetricsNil(t *testing.T) {
	leaktest.Check(t)
	s, _, _ := start(t, Config{}, logtest.Topic("orders", 1))
	c := dial(t, s.Addr())
	c.do(produceReq(9, 1, "orders", 0, records("a")))
	fr := c.do(fetchReq(12, "orders", 0, 0, 0)).(*kmsg.FetchResponse)
	require.Equal(t, errNone, fr.Topics[0].Partitions[0].ErrorCode)
}

func TestBatchRecords(t *testing.T) {
	one := records("a", "b", "c")
	require.EqualValues(t, 3, batchRecords(one))
	two := append(append([]byte(nil), one...), records("d", "e")...)
	require.EqualValues(t, 5, batchRecords(two))
	require.EqualValues(t, 3, batchRecords(two[:len(one)+10]), "a torn second batch counts nothing")
	require.EqualValues(t, 0, batchRecords(nil))
}

func TestResponseFailed(t *testing.T) {
	p := kmsg.NewPtrProduceResponse()
	p.Topics = []kmsg.ProduceResponseTopic{{Partitions: []kmsg.ProduceResponseTopicPartition{{}, {}}}}
	require.False(t, responseFailed(p))
	p.Topics[0].Partitions[1].ErrorCode = errUnknownTopicOrPartition
	require.True(t, responseFailed(p))
	h := kmsg.NewPtrHeartbeatResponse()
	require.False(t, responseFailed(h))
	h.ErrorCode = 27
	require.True(t, responseFailed(h))
	require.False(t, responseFailed(nil))

	of := kmsg.NewPtrOffsetFetchResponse()
	of.Groups = []kmsg.OffsetFetchResponseGroup{{Topics: []kmsg.OffsetFetchResponseGroupTopic{{Partitions: []kmsg.OffsetFetchResponseGroupTopicPartition{{}}}}}}
	require.False(t, responseFailed(of))
	of.Groups[0].Topics[0].Partitions[0].ErrorCode = errNotCoordinator
	require.True(t, responseFailed(of), "a partition's code inside a group")
	dr := kmsg.NewPtrDeleteRecordsResponse()
	dr.Topics = []kmsg.DeleteRecordsResponseTopic{{Partitions: []kmsg.DeleteRecordsResponseTopicPartition{{}, {ErrorCode: 1}}}}
	require.True(t, responseFailed(dr))
	ia := kmsg.NewPtrIncrementalAlterConfigsResponse()
	ia.Resources = []kmsg.IncrementalAlterConfigsResponseResource{{}}
	require.False(t, responseFailed(ia))
	ia.Resources[0].ErrorCode = 40
	require.True(t, responseFailed(ia))
}
