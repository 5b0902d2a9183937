package controller

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/strata-log/strata/acl"
	"github.com/strata-log/strata/log"
)

// Byte layout of the security records (codec.go's encodings):
//
//	aclRecord, removeACLRecord (types 64, 65): uvarint count ≥ 1 of
//	  bindings, each resource type byte, resource name string, pattern
//	  type byte, principal string, host string, operation byte,
//	  permission byte
//	scramRecord (66): user string, mechanism string, salt string,
//	  iterations int, stored key string, server key string
//	removeSCRAMRecord (67): user string, mechanism string
//	quotaRecord (68): user part, client-id part (each a byte: 0 absent,
//	  1 the default, 2 a name, followed by the name string), key string,
//	  value as 8 bytes big-endian IEEE 754, remove bool

func appendSecurityRecord(b []byte, r record) []byte {
	switch r := r.(type) {
	case aclRecord:
		b = appendBindings(b, r.Bindings)
	case removeACLRecord:
		b = appendBindings(b, r.Bindings)
	case scramRecord:
		b = appendString(b, r.User)
		b = appendString(b, r.Mechanism)
		b = appendString(b, string(r.Credential.Salt))
		b = appendInt(b, r.Credential.Iterations)
		b = appendString(b, string(r.Credential.StoredKey))
		b = appendString(b, string(r.Credential.ServerKey))
	case removeSCRAMRecord:
		b = appendString(b, r.User)
		b = appendString(b, r.Mechanism)
	case quotaRecord:
		b = appendQuotaName(b, r.Entity.User)
		b = appendQuotaName(b, r.Entity.ClientID)
		b = appendString(b, r.Key)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(r.Value))
		b = appendBool(b, r.Remove)
	default:
		panic(fmt.Sprintf("controller: unknown security record type %T", r))
	}
	return b
}

func appendBindings(b []byte, bs []acl.Binding) []byte {
	b = binary.AppendUvarint(b, uint64(len(bs)))
	for _, x := range bs {
		b = append(b, byte(x.ResourceType))
		b = appendString(b, x.ResourceName)
		b = append(b, byte(x.PatternType))
		b = appendString(b, x.Principal)
		b = appendString(b, x.Host)
		b = append(b, byte(x.Operation), byte(x.Permission))
	}
	return b
}

func appendQuotaName(b []byte, n log.QuotaName) []byte {
	switch {
	case !n.In:
		return append(b, 0)
	case n.Default:
		return append(b, 1)
	}
	return appendString(append(b, 2), n.Name)
}

// securityRecord decodes the fields of a security record of type t.
func (d *decoder) securityRecord(t recordType) record {
	switch t {
	case typeACL:
		return aclRecord{Bindings: d.bindings()}
	case typeRemoveACL:
		return removeACLRecord{Bindings: d.bindings()}
	case typeSCRAM:
		r := scramRecord{User: d.string(), Mechanism: d.string()}
		r.Credential.Salt = []byte(d.string())
		r.Credential.Iterations = d.int()
		r.Credential.StoredKey = []byte(d.string())
		r.Credential.ServerKey = []byte(d.string())
		return r
	case typeRemoveSCRAM:
		return removeSCRAMRecord{User: d.string(), Mechanism: d.string()}
	case typeQuota:
		r := quotaRecord{}
		r.Entity.User = d.quotaName()
		r.Entity.ClientID = d.quotaName()
		r.Key = d.string()
		r.Value = d.float64()
		r.Remove = d.bool()
		return r
	}
	d.fail("record type %d", t)
	return nil
}

func (d *decoder) bindings() []acl.Binding {
	n := d.count()
	if d.err == nil && n == 0 {
		d.fail("an ACL record without bindings")
	}
	var bs []acl.Binding
	for i := 0; i < n && d.err == nil; i++ {
		var x acl.Binding
		x.ResourceType = acl.ResourceType(d.byte())
		x.ResourceName = d.string()
		x.PatternType = acl.PatternType(d.byte())
		x.Principal = d.string()
		x.Host = d.string()
		x.Operation = acl.Operation(d.byte())
		x.Permission = acl.Permission(d.byte())
		bs = append(bs, x)
	}
	return bs
}

func (d *decoder) quotaName() log.QuotaName {
	switch v := d.byte(); v {
	case 0:
		return log.QuotaName{}
	case 1:
		return log.QuotaDefault()
	case 2:
		return log.QuotaNamed(d.string())
	default:
		d.fail("quota entity part %d", v)
		return log.QuotaName{}
	}
}

func (d *decoder) float64() float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("truncated float")
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}
