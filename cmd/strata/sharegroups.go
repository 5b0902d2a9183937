package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/log"
	"github.com/strata-log/strata/share"
)

const shareGroupsHelp = `
Lists and describes share groups (KIP-932; kafka-share-groups.sh):

  strata share-groups --bootstrap-server ADDR|--data-dir DIR --list
  strata share-groups --bootstrap-server ADDR|--data-dir DIR --describe --group G|--all-groups

--list prints each share group with its state. --describe prints, for each
group, its state and epoch, its members (id, host, client id, epoch and
assigned partitions), and each share-partition: its start offset (every
record before it is done with), its lag (records after it not yet
acknowledged) and, on a data dir, its in-flight records by state
(available/acquired/acknowledged/archived) and their delivery counts, as
runs FIRST-LAST:STATE×COUNT. Over --bootstrap-server the requests are
ListGroups (type share), ShareGroupDescribe and DescribeShareGroupOffsets
to that broker, which on strata serve coordinates every group.`

func runShareGroups(e *env, args []string) (err error) {
	fs := newFlags(e, "share-groups", "--bootstrap-server ADDR|--data-dir DIR --list|--describe [--group G]... [--all-groups]", shareGroupsHelp)
	var t target
	t.register(fs)
	var groups stringList
	var list, describe, all bool
	fs.BoolVar(&list, "list", false, "list the share groups")
	fs.BoolVar(&describe, "describe", false, "describe share groups: members, assignment, start offsets, in-flight records")
	fs.Var(&groups, "group", "`GROUP` to describe; repeatable")
	fs.BoolVar(&all, "all-groups", false, "describe every share group")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q: give --list or --describe", pos[0])
	case list == describe:
		return usagef("give one of --list and --describe")
	case list && (len(groups) > 0 || all):
		return usagef("--list takes no --group or --all-groups")
	case describe && len(groups) > 0 && all:
		return usagef("give --group or --all-groups, not both")
	case describe && len(groups) == 0 && !all:
		return usagef("--describe needs --group or --all-groups")
	}
	c, err := openClient(e, &t)
	if err != nil {
		return err
	}
	defer c.close(&err)
	var src shareSource
	if c.broker != nil {
		src = dirShares{c.broker}
	} else {
		a := &admin{c: c.kafka}
		src = wireShares{a}
	}
	ids := []string(groups)
	if list || all {
		listing, err := src.list()
		if err != nil {
			return err
		}
		if list {
			rows := make([][]string, 0, len(listing))
			for _, l := range listing {
				rows = append(rows, []string{l.Group, l.State})
			}
			return table(e.stdout, "GROUP\tSTATE", rows)
		}
		ids = ids[:0]
		for _, l := range listing {
			ids = append(ids, l.Group)
		}
	}
	views := make([]shareGroupView, 0, len(ids))
	for _, id := range ids {
		v, err := src.describe(id)
		if err != nil {
			return err
		}
		views = append(views, v)
	}
	return printShareGroups(e.stdout, views)
}

// shareGroupView is what describe prints of a share group.
type shareGroupView struct {
	share.GroupDescription
	parts []sharePartView
}

type sharePartView struct {
	t          log.TopicPartition
	start, lag int64                 // lag -1: unknown
	inflight   *share.PartitionState // nil: unknown (over Kafka)
}

// shareSource is where share groups are read: a data dir's coordinator or
// a Kafka-protocol broker.
type shareSource interface {
	list() ([]share.Listing, error)
	describe(group string) (shareGroupView, error)
}

type dirShares struct{ b *log.Broker }

func (d dirShares) list() ([]share.Listing, error) { return d.b.ShareCoordinator().List(), nil }

func (d dirShares) describe(group string) (shareGroupView, error) {
	sc := d.b.ShareCoordinator()
	desc, ok := sc.Describe(group)
	if !ok {
		return shareGroupView{}, fmt.Errorf("share group %q: %w", group, share.ErrGroupNotFound)
	}
	v := shareGroupView{GroupDescription: desc}
	for t, st := range sc.Offsets(group) {
		lag := int64(-1)
		if p, err := d.b.Partition(t.Topic, t.Partition); err == nil {
			lag = max(0, p.HighWatermark()-st.StartOffset-int64(st.Acknowledged+st.Archived))
		}
		v.parts = append(v.parts, sharePartView{t: t, start: st.StartOffset, lag: lag, inflight: &st})
	}
	return v, nil
}

type wireShares struct{ a *admin }

func (w wireShares) list() ([]share.Listing, error) {
	req := kmsg.NewPtrListGroupsRequest()
	req.TypesFilter = []string{"share"}
	resp, err := w.a.do(req, 5)
	if err != nil {
		return nil, err
	}
	if req.Version < 5 {
		return nil, fmt.Errorf("the broker's ListGroups v%d has no group types (v5 needed)", req.Version)
	}
	r := resp.(*kmsg.ListGroupsResponse)
	if err := codeError(r.ErrorCode, "ListGroups"); err != nil {
		return nil, err
	}
	var out []share.Listing
	for _, g := range r.Groups {
		out = append(out, share.Listing{Group: g.Group, State: g.GroupState})
	}
	slices.SortFunc(out, func(a, b share.Listing) int { return strings.Compare(a.Group, b.Group) })
	return out, nil
}

func (w wireShares) describe(group string) (shareGroupView, error) {
	dreq := kmsg.NewPtrShareGroupDescribeRequest()
	dreq.GroupIDs = []string{group}
	resp, err := w.a.do(dreq, 1)
	if err != nil {
		return shareGroupView{}, err
	}
	dr := resp.(*kmsg.ShareGroupDescribeResponse)
	if len(dr.Groups) != 1 {
		return shareGroupView{}, fmt.Errorf("ShareGroupDescribe: %d groups answered for one", len(dr.Groups))
	}
	g := dr.Groups[0]
	if err := kafkaCodeError(g.ErrorCode, g.ErrorMessage); err != nil {
		return shareGroupView{}, fmt.Errorf("ShareGroupDescribe %s: %w", group, err)
	}
	v := shareGroupView{GroupDescription: share.GroupDescription{Group: g.GroupID, State: g.GroupState, Epoch: g.GroupEpoch,
		AssignmentEpoch: g.AssignmentEpoch, Assignor: g.Assignor}}
	for _, m := range g.Members {
		md := share.MemberDescription{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, MemberEpoch: m.MemberEpoch}
		for _, tp := range m.Assignment.TopicPartitions {
			for _, p := range tp.Partitions {
				md.Assignment = append(md.Assignment, log.TopicPartition{Topic: tp.Topic, Partition: int(p)})
			}
		}
		v.Members = append(v.Members, md)
	}
	oreq := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	og := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	og.GroupID = group // Topics nil: every topic with state
	oreq.Groups = append(oreq.Groups, og)
	resp, err = w.a.do(oreq, 1)
	if err != nil {
		return shareGroupView{}, err
	}
	or := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, og := range or.Groups {
		if err := kafkaCodeError(og.ErrorCode, og.ErrorMessage); err != nil {
			return shareGroupView{}, fmt.Errorf("DescribeShareGroupOffsets %s: %w", group, err)
		}
		for _, t := range og.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.StartOffset < 0 {
					continue
				}
				lag := int64(-1)
				if oreq.Version >= 1 {
					lag = p.Lag
				}
				v.parts = append(v.parts, sharePartView{t: log.TopicPartition{Topic: t.Topic, Partition: int(p.Partition)}, start: p.StartOffset, lag: lag})
			}
		}
	}
	return v, nil
}

// printShareGroups prints three tables: the groups, their members, their
// share-partitions.
func printShareGroups(w io.Writer, views []shareGroupView) error {
	var groups, members, parts [][]string
	for _, v := range views {
		groups = append(groups, []string{v.Group, v.State, strconv.Itoa(int(v.Epoch)), strconv.Itoa(len(v.Members))})
		for _, m := range v.Members {
			members = append(members, []string{v.Group, m.MemberID, dash(m.ClientHost), dash(m.ClientID), strconv.Itoa(int(m.MemberEpoch)), assignmentColumn(m.Assignment)})
		}
		slices.SortFunc(v.parts, func(a, b sharePartView) int {
			return cmp.Or(strings.Compare(a.t.Topic, b.t.Topic), a.t.Partition-b.t.Partition)
		})
		for _, p := range v.parts {
			lag, counts, runs := "-", "-", "-"
			if p.lag >= 0 {
				lag = strconv.FormatInt(p.lag, 10)
			}
			if s := p.inflight; s != nil {
				counts = fmt.Sprintf("%d/%d/%d/%d", s.Available, s.Acquired, s.Acknowledged, s.Archived)
				runs = deliveryRuns(s.Batches)
			}
			parts = append(parts, []string{v.Group, p.t.Topic, strconv.Itoa(p.t.Partition), strconv.FormatInt(p.start, 10), lag, counts, runs})
		}
	}
	if err := table(w, "GROUP\tSTATE\tGROUP-EPOCH\t#MEMBERS", groups); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := table(w, "GROUP\tCONSUMER-ID\tHOST\tCLIENT-ID\tEPOCH\tASSIGNMENT", members); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return table(w, "GROUP\tTOPIC\tPARTITION\tSTART-OFFSET\tLAG\tIN-FLIGHT(AV/ACQ/ACK/ARC)\tDELIVERIES", parts)
}

// deliveryRuns prints in-flight runs as FIRST-LAST:STATE×COUNT.
func deliveryRuns(bs []share.StateBatch) string {
	if len(bs) == 0 {
		return "-"
	}
	var b strings.Builder
	for i, r := range bs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d-%d:%s×%d", r.First, r.Last, r.State, r.DeliveryCount)
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
