package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const leaderElectionHelp = `
Elects partition leaders on demand (kafka-leader-election.sh; Kafka's
ElectLeaders):

  strata leader-election --bootstrap-server ADDR --election-type preferred|unclean \
      (--topic T --partition N | --all-topic-partitions | --path-to-json-file FILE)

preferred moves each partition's leadership to its first replica when that
one is live and in the ISR; unclean gives a leaderless partition a leader,
from outside the ISR when no ISR member is live, so records only the old
ISR had are lost: use it only to bring a partition back when its ISR is
gone for good. The JSON file is kafka-leader-election.sh's:
{"partitions": [{"topic": "t", "partition": 0}, ...]}. Exits 1 when a
partition could not be elected (one whose leader is already the one asked
for is not an error).`

func runLeaderElection(e *env, args []string) error {
	fs := newFlags(e, "leader-election", "--bootstrap-server ADDR --election-type preferred|unclean (--topic T --partition N | --all-topic-partitions | --path-to-json-file FILE)", leaderElectionHelp)
	var t target
	t.register(fs)
	var typ, topic, jsonFile string
	var partition int
	var all bool
	fs.StringVar(&typ, "election-type", "", "`TYPE`: preferred or unclean")
	fs.StringVar(&topic, "topic", "", "`TOPIC` of the partition to elect a leader for (with --partition)")
	fs.IntVar(&partition, "partition", -1, "`N`: the partition of --topic")
	fs.BoolVar(&all, "all-topic-partitions", false, "every partition of every topic")
	fs.StringVar(&jsonFile, "path-to-json-file", "", "`FILE`: the partitions, as kafka-leader-election.sh reads them")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if t.dataDir != "" || t.bootstrap == "" {
		return usagef("leader-election works on a running cluster: give --bootstrap-server")
	}
	req := kmsg.NewPtrElectLeadersRequest()
	switch strings.ToLower(typ) {
	case "preferred":
		req.ElectionType = 0
	case "unclean":
		req.ElectionType = 1
	default:
		return usagef("--election-type preferred or unclean is required")
	}
	n := 0
	for _, b := range []bool{topic != "", all, jsonFile != ""} {
		if b {
			n++
		}
	}
	switch {
	case n != 1:
		return usagef("give one of --topic with --partition, --all-topic-partitions, --path-to-json-file")
	case topic != "" && partition < 0:
		return usagef("--topic needs --partition N")
	case topic == "" && partition >= 0:
		return usagef("--partition goes with --topic")
	}
	switch {
	case topic != "":
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{int32(partition)}
		req.Topics = append(req.Topics, rt)
	case jsonFile != "":
		b, err := os.ReadFile(jsonFile)
		if err != nil {
			return usagef("--path-to-json-file: %v", err)
		}
		var doc struct {
			Partitions []struct {
				Topic     string `json:"topic"`
				Partition *int32 `json:"partition"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return usagef("--path-to-json-file %s: %v", jsonFile, err)
		}
		if len(doc.Partitions) == 0 {
			return usagef("--path-to-json-file %s: no partitions", jsonFile)
		}
		for _, p := range doc.Partitions {
			if p.Topic == "" || p.Partition == nil || *p.Partition < 0 {
				return usagef("--path-to-json-file %s: each partition needs a topic and a partition >= 0", jsonFile)
			}
			if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.Topic {
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic = p.Topic
				req.Topics = append(req.Topics, rt)
			}
			rt := &req.Topics[len(req.Topics)-1]
			rt.Partitions = append(rt.Partitions, *p.Partition)
		}
	}
	req.TimeoutMillis = int32(adminTimeout.Milliseconds())
	a, err := dialAdmin(&t)
	if err != nil {
		return err
	}
	defer a.Close()
	resp, err := a.do(req, 2)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.ElectLeadersResponse)
	if err := kafkaCodeError(r.ErrorCode, nil); err != nil {
		return err
	}
	name := map[int8]string{0: "PREFERRED", 1: "UNCLEAN"}[req.ElectionType]
	var done, notNeeded, failed []string
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			tp := fmt.Sprintf("%s-%d", rt.Topic, p.Partition)
			switch p.ErrorCode {
			case 0:
				done = append(done, tp)
			case 84: // ELECTION_NOT_NEEDED
				notNeeded = append(notNeeded, tp)
			default:
				failed = append(failed, fmt.Sprintf("%s: %v", tp, kafkaCodeError(p.ErrorCode, p.ErrorMessage)))
			}
		}
	}
	if len(done) > 0 {
		fmt.Fprintf(e.stdout, "Successfully completed leader election (%s) for partitions %s\n", name, strings.Join(done, ", "))
	}
	if len(notNeeded) > 0 {
		fmt.Fprintf(e.stdout, "Valid replica already elected for partitions %s\n", strings.Join(notNeeded, ", "))
	}
	if len(failed) > 0 {
		fmt.Fprintf(e.stderr, "Error completing leader election (%s) for partitions:\n", name)
		for _, f := range failed {
			fmt.Fprintf(e.stderr, "  %s\n", f)
		}
		return errProblems
	}
	return nil
}
