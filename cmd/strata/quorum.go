package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const quorumHelp = `
Describes and changes the controller quorum of a cluster
(kafka-metadata-quorum.sh; KIP-853's DescribeQuorum, AddRaftVoter and
RemoveRaftVoter), through any member:

  strata quorum --bootstrap-server ADDR describe [--status|--replication]
  strata quorum --bootstrap-server ADDR add-voter --voter-id N
  strata quorum --bootstrap-server ADDR remove-voter --voter-id N

describe --status prints the leader, its epoch, the high watermark and the
voters and observers; --replication one line per member with the metadata
offset it has applied and its lag. add-voter promotes a running broker
(a member started with --peer naming the voters, its --node-id not among
them) once it has caught up; remove-voter removes a voter, refused when
the voters left would have no live majority. One change at a time: to
replace a voter's machine, start the new one as a broker, add-voter it,
remove-voter the old one, then stop it.`

func runQuorum(e *env, args []string) error {
	fs := newFlags(e, "quorum", "--bootstrap-server ADDR describe [--status|--replication] | add-voter --voter-id N | remove-voter --voter-id N", quorumHelp)
	var t target
	t.register(fs)
	var status, replication bool
	var voter int
	fs.BoolVar(&status, "status", false, "describe: the leader, epoch, high watermark, voters and observers (the default)")
	fs.BoolVar(&replication, "replication", false, "describe: one line per member with its applied offset and lag")
	fs.IntVar(&voter, "voter-id", 0, "`N`: the member add-voter promotes or remove-voter removes")
	fs.IntVar(&voter, "controller-id", 0, "`N`: --voter-id, as kafka-metadata-quorum.sh names it")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one of describe, add-voter, remove-voter")
	}
	if t.dataDir != "" || t.bootstrap == "" {
		return usagef("quorum works on a running cluster: give --bootstrap-server")
	}
	action := pos[0]
	switch action {
	case "describe":
		if status && replication {
			return usagef("give --status or --replication, not both")
		}
	case "add-voter", "remove-voter":
		if voter <= 0 {
			return usagef("%s needs --voter-id N (> 0)", action)
		}
	default:
		return usagef("unknown action %q: want describe, add-voter or remove-voter", action)
	}
	a, err := dialAdmin(&t)
	if err != nil {
		return err
	}
	defer a.Close()
	switch action {
	case "add-voter":
		req := kmsg.NewPtrAddRaftVoterRequest()
		req.VoterID, req.TimeoutMillis = int32(voter), int32(adminTimeout.Milliseconds())
		resp, err := a.do(req, 1)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.AddRaftVoterResponse)
		if err := quorumCodeError(r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "added voter %d\n", voter)
		return nil
	case "remove-voter":
		req := kmsg.NewPtrRemoveRaftVoterRequest()
		req.VoterID = int32(voter)
		resp, err := a.do(req, 0)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.RemoveRaftVoterResponse)
		if err := quorumCodeError(r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "removed voter %d\n", voter)
		return nil
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := a.do(req, 2)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.DescribeQuorumResponse)
	if err := quorumCodeError(r.ErrorCode, r.ErrorMessage); err != nil {
		return err
	}
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return fmt.Errorf("DescribeQuorum: answered %d topics, want __cluster_metadata-0", len(r.Topics))
	}
	p := r.Topics[0].Partitions[0]
	if err := quorumCodeError(p.ErrorCode, p.ErrorMessage); err != nil {
		return err
	}
	if replication {
		printQuorumReplication(e, p)
		return nil
	}
	ids := func(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) string {
		var s []string
		for _, x := range rs {
			s = append(s, fmt.Sprint(x.ReplicaID))
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	maxLag := int64(0)
	for _, v := range p.CurrentVoters {
		if v.LogEndOffset >= 0 {
			maxLag = max(maxLag, p.HighWatermark-v.LogEndOffset)
		}
	}
	fmt.Fprintf(e.stdout, "LeaderId:               %d\n", p.LeaderID)
	fmt.Fprintf(e.stdout, "LeaderEpoch:            %d\n", p.LeaderEpoch)
	fmt.Fprintf(e.stdout, "HighWatermark:          %d\n", p.HighWatermark)
	fmt.Fprintf(e.stdout, "MaxFollowerLag:         %d\n", maxLag)
	fmt.Fprintf(e.stdout, "CurrentVoters:          %s\n", ids(p.CurrentVoters))
	fmt.Fprintf(e.stdout, "CurrentObservers:       %s\n", ids(p.Observers))
	return nil
}

// printQuorumReplication prints describe --replication: one line per
// member, the leader first, as kafka-metadata-quorum.sh does.
func printQuorumReplication(e *env, p kmsg.DescribeQuorumResponseTopicPartition) {
	type row struct {
		id     int32
		leo    int64
		status string
	}
	var rows []row
	for _, v := range p.CurrentVoters {
		st := "Follower"
		if v.ReplicaID == p.LeaderID {
			st = "Leader"
		}
		rows = append(rows, row{v.ReplicaID, v.LogEndOffset, st})
	}
	for _, o := range p.Observers {
		rows = append(rows, row{o.ReplicaID, o.LogEndOffset, "Observer"})
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if (a.status == "Leader") != (b.status == "Leader") {
			if a.status == "Leader" {
				return -1
			}
			return 1
		}
		return 0
	})
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NodeId\tLogEndOffset\tLag\tStatus")
	for _, r := range rows {
		lag := "unknown"
		leo := fmt.Sprint(r.leo)
		if r.leo >= 0 {
			lag = fmt.Sprint(max(p.HighWatermark-r.leo, 0))
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", r.id, leo, lag, r.status)
	}
	w.Flush()
}

// quorumCodeError is kafkaCodeError with the quorum's codes named.
func quorumCodeError(code int16, msg *string) error {
	names := map[int16]string{7: "REQUEST_TIMED_OUT", 126: "DUPLICATE_VOTER", 127: "VOTER_NOT_FOUND", 35: "UNSUPPORTED_VERSION"}
	if name, ok := names[code]; ok {
		if msg != nil && *msg != "" {
			name += ": " + *msg
		}
		return fmt.Errorf("%s", name)
	}
	return kafkaCodeError(code, msg)
}
