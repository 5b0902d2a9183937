package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
)

// Dynamic configs (Kafka's ConfigRecord, KRaft's ConfigurationControlManager):
// a topic's configs and the brokers' dynamic configs live in the metadata,
// so every member applies the same ones, in the same order, and a
// restarted member finds them in the Raft log or the snapshot. A BROKER
// resource is the cluster-wide default (name "") or one broker (its id);
// a TOPIC resource is a topic, whose configs are TopicInfo.Configs. The
// controller does not read the values: the members give them meaning
// (package replica: the replication throttles, the topics' log configs).

// ConfigResourceType is the kind of resource an alteration names, with
// Kafka's codes.
type ConfigResourceType int8

const (
	TopicConfigs  ConfigResourceType = 2 // Kafka's TOPIC
	BrokerConfigs ConfigResourceType = 4 // Kafka's BROKER
)

func (t ConfigResourceType) String() string {
	switch t {
	case TopicConfigs:
		return "topic"
	case BrokerConfigs:
		return "broker"
	}
	return fmt.Sprintf("resource type %d", int8(t))
}

// ConfigAlteration changes one resource's configs: each of Set is set to
// its value, each of Delete removed (back to its default). A config in
// both is ErrInvalidConfig.
type ConfigAlteration struct {
	Type   ConfigResourceType `json:"type"`
	Name   string             `json:"name"`
	Set    map[string]string  `json:"set,omitzero"`
	Delete []string           `json:"delete,omitzero"`
}

// configRecord: the config Key of a resource is set to Value, or removed
// (Kafka's ConfigRecord, whose null value removes).
type configRecord struct {
	Type   ConfigResourceType
	Name   string
	Key    string
	Value  string
	Remove bool
}

const typeConfig recordType = 11

func (configRecord) recordType() recordType { return typeConfig }

// opAlterConfigs is AlterConfigs forwarded to the active controller.
const opAlterConfigs = "alter_configs"

// configResult is one alteration's error on the wire ("" code: none).
type configResult struct {
	Code    string `json:"code,omitzero"`
	Message string `json:"message,omitzero"`
}

// BrokerConfigs returns the dynamic configs set on a BROKER resource:
// name "" the cluster-wide defaults, else a broker's id. Never nil.
func (img *Image) BrokerConfigs(name string) map[string]string {
	m := maps.Clone(img.brokerConfigs[name])
	if m == nil {
		m = map[string]string{}
	}
	return m
}

// brokerConfig returns one dynamic broker config of resource name.
func (img *Image) brokerConfig(name, key string) (string, bool) {
	v, ok := img.brokerConfigs[name][key]
	return v, ok
}

// BrokerConfig returns the value of a dynamic broker config for broker
// id: its own, else the cluster-wide default; false when neither is set.
func (img *Image) BrokerConfig(id int, key string) (string, bool) {
	if v, ok := img.brokerConfig(strconv.Itoa(id), key); ok {
		return v, true
	}
	return img.brokerConfig("", key)
}

// validBrokerResource reports whether name is a BROKER resource: "" or
// a broker id.
func validBrokerResource(name string) bool {
	if name == "" {
		return true
	}
	id, err := strconv.Atoi(name)
	return err == nil && id > 0 && strconv.Itoa(id) == name
}

// applyConfig applies a configRecord (see Image.apply). Inner maps are
// never modified in place: a change replaces the resource's map, so images
// may share them.
func (img *Image) applyConfig(r configRecord) error {
	if r.Key == "" {
		return fmt.Errorf("%w: config without a name", errInapplicable)
	}
	set := func(cur map[string]string) (map[string]string, bool) {
		old, had := cur[r.Key]
		if r.Remove && !had || !r.Remove && had && old == r.Value {
			return nil, false
		}
		next := maps.Clone(cur)
		if next == nil {
			next = map[string]string{}
		}
		if r.Remove {
			delete(next, r.Key)
		} else {
			next[r.Key] = r.Value
		}
		return next, true
	}
	switch r.Type {
	case BrokerConfigs:
		if !validBrokerResource(r.Name) {
			return fmt.Errorf("%w: broker config resource %q", errInapplicable, r.Name)
		}
		next, ok := set(img.brokerConfigs[r.Name])
		if !ok {
			return fmt.Errorf("%w: config %s of broker %q changes nothing", errInapplicable, r.Key, r.Name)
		}
		if img.brokerConfigs == nil {
			img.brokerConfigs = map[string]map[string]string{}
		}
		if len(next) == 0 {
			delete(img.brokerConfigs, r.Name)
		} else {
			img.brokerConfigs[r.Name] = next
		}
	case TopicConfigs:
		t, ok := img.topics[r.Name]
		if !ok {
			return fmt.Errorf("%w: config of unknown topic %s", errInapplicable, r.Name)
		}
		next, ok := set(t.configs)
		if !ok {
			return fmt.Errorf("%w: config %s of topic %s changes nothing", errInapplicable, r.Key, r.Name)
		}
		img.mutTopic(r.Name).configs = next
	default:
		return fmt.Errorf("%w: config of %s", errInapplicable, r.Type)
	}
	return nil
}

// brokerConfigRecords are the records that rebuild the dynamic broker
// configs (snapshots), by resource and key.
func brokerConfigRecords(img *Image) []record {
	names := slices.Sorted(maps.Keys(img.brokerConfigs))
	var recs []record
	for _, n := range names {
		m := img.brokerConfigs[n]
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			recs = append(recs, configRecord{Type: BrokerConfigs, Name: n, Key: k, Value: m[k]})
		}
	}
	return recs
}

// decideAlterConfigs turns each valid alteration into one record per
// config it changes (a set to the current value, or a delete of a config
// not set, records nothing); an invalid one gets its error and records
// nothing.
func decideAlterConfigs(img *Image, as []ConfigAlteration) ([]record, []configResult) {
	var recs []record
	res := make([]configResult, len(as))
	work := img.cloneShared()
	for i, a := range as {
		r, err := alterationRecords(work, a)
		if err != nil {
			res[i] = configResult{Code: wireCode(err), Message: err.Error()}
			continue
		}
		for _, rec := range r {
			_ = work.applyConfig(rec.(configRecord)) // alterationRecords checked it applies
		}
		recs = append(recs, r...)
	}
	return recs, res
}

// alterationRecords checks a against img and returns its records.
func alterationRecords(img *Image, a ConfigAlteration) ([]record, error) {
	var cur map[string]string
	switch a.Type {
	case BrokerConfigs:
		if !validBrokerResource(a.Name) {
			return nil, fmt.Errorf("%w: broker resource %q: a broker id or \"\" (the cluster's default)", ErrInvalidRequest, a.Name)
		}
		cur = img.brokerConfigs[a.Name]
	case TopicConfigs:
		t, ok := img.topics[a.Name]
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, a.Name)
		}
		cur = t.configs
	default:
		return nil, fmt.Errorf("%w: configs of %s", ErrInvalidRequest, a.Type)
	}
	var recs []record
	for _, k := range slices.Sorted(maps.Keys(a.Set)) {
		if k == "" {
			return nil, fmt.Errorf("%w: a config without a name", ErrInvalidConfig)
		}
		if slices.Contains(a.Delete, k) {
			return nil, fmt.Errorf("%w: %s both set and deleted", ErrInvalidConfig, k)
		}
		if old, had := cur[k]; !had || old != a.Set[k] {
			recs = append(recs, configRecord{Type: a.Type, Name: a.Name, Key: k, Value: a.Set[k]})
		}
	}
	seen := map[string]bool{}
	for _, k := range a.Delete {
		if _, had := cur[k]; had && !seen[k] {
			recs = append(recs, configRecord{Type: a.Type, Name: a.Name, Key: k, Remove: true})
		}
		seen[k] = true
	}
	return recs, nil
}

// AlterConfigs applies config alterations through the active controller,
// each on its own: one error per alteration (ErrUnknownTopic,
// ErrInvalidConfig, ErrInvalidRequest; an alteration that fails changes
// nothing), and the version the changes committed at (0: none changed
// anything). Members apply the changes as they apply that version.
func (c *Controller) AlterConfigs(ctx context.Context, as []ConfigAlteration) ([]error, uint64, error) {
	out, err := c.call(ctx, op{Kind: opAlterConfigs, Configs: as})
	if err != nil {
		return nil, 0, err
	}
	errs := make([]error, len(as))
	for i := range errs {
		if i < len(out.Configs) && out.Configs[i].Code != "" {
			r := out.Configs[i]
			if s := wireError(r.Code); s != nil {
				errs[i] = &remoteError{msg: r.Message, sentinel: s}
			} else {
				errs[i] = errors.New(r.Message)
			}
		}
	}
	return errs, out.Version, nil
}
