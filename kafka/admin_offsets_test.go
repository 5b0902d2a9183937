package kafka

import (
	"strings"
	"testing"

	"github.com/strata-log/strata/log/logtest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOffsetCommitMetadata: the metadata of a commit (every version) and
// its leader epoch (v6+) come back from OffsetFetch, of one group (v0–v7)
// and of several (v8+), and through the broker's __consumer_offsets.
func TestOffsetCommitMetadata(t *testing.T) {
	s, _, _ := start(t, Config{}, logtest.Topic("t", 2))
	c := dial(t, s.Addr())
	for v := int16(0); v <= 9; v++ {
		req := commitReq(v, "g", "", -1, "t", int64(v)+10, int64(v)+20)
		req.Topics[0].Partitions[0].Metadata = kmsg.StringPtr("meta-" + string(rune('a'+v)))
		req.Topics[0].Partitions[0].LeaderEpoch = 0
		req.Topics[0].Partitions[1].Metadata = nil
		resp := c.do(req).(*kmsg.OffsetCommitResponse)
		require.Equal(t, errNone, resp.Topics[0].Partitions[0].ErrorCode, "v%d", v)

		wantEpoch := int32(-1)
		if v >= 6 {
			wantEpoch = 0
		}
		for fv := int16(1); fv <= 9; fv += 4 { // 1, 5, 9
			f := kmsg.NewPtrOffsetFetchRequest()
			f.SetVersion(fv)
			type got struct {
				off   int64
				epoch int32
				meta  string
			}
			var parts []got
			if fv < 8 {
				f.Group = "g"
				ft := kmsg.NewOffsetFetchRequestTopic()
				ft.Topic, ft.Partitions = "t", []int32{0, 1}
				f.Topics = append(f.Topics, ft)
				fr := c.do(f).(*kmsg.OffsetFetchResponse)
				for _, p := range fr.Topics[0].Partitions {
					parts = append(parts, got{p.Offset, p.LeaderEpoch, *p.Metadata})
				}
			} else {
				g := kmsg.NewOffsetFetchRequestGroup()
				g.Group = "g" // every commit of it
				f.Groups = append(f.Groups, g)
				fr := c.do(f).(*kmsg.OffsetFetchResponse)
				for _, p := range fr.Groups[0].Topics[0].Partitions {
					parts = append(parts, got{p.Offset, p.LeaderEpoch, *p.Metadata})
				}
			}
			e := wantEpoch
			if fv < 5 {
				e = -1 // no epoch in the answer before v5
			}
			require.Equal(t, []got{
				{int64(v) + 10, e, "meta-" + string(rune('a'+v))},
				{int64(v) + 20, -1, ""},
			}, parts, "commit v%d fetch v%d", v, fv)
		}
	}
	// Too long: OFFSET_METADATA_TOO_LARGE, the others committed.
	req := commitReq(9, "g", "", -1, "t", 1, 2)
	req.Topics[0].Partitions[0].Metadata = kmsg.StringPtr(strings.Repeat("m", maxOffsetMetadata+1))
	resp := c.do(req).(*kmsg.OffsetCommitResponse)
	require.Equal(t, errOffsetMetadataTooLarge, resp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, errNone, resp.Topics[0].Partitions[1].ErrorCode)
}
