package main

import (
	"slices"
	"testing"
)

func TestServeACLOverrides(t *testing.T) {
	var c serveConfig
	if err := c.override("num.partitions=3"); err != nil || c.server.Authorizer != nil {
		t.Fatalf("authorizer on without being asked: %v %v", err, c.server.Authorizer)
	}
	for _, kv := range []string{"super.users=User:admin; User:ops", "allow.everyone.if.no.acl.found=true"} {
		if err := c.override(kv); err != nil {
			t.Fatalf("%s: %v", kv, err)
		}
	}
	a := c.server.Authorizer
	if a == nil || !slices.Equal(a.SuperUsers, []string{"User:admin", "User:ops"}) || !a.AllowIfNoACL {
		t.Fatalf("authorizer %+v", a)
	}
	if err := c.override("authorizer.class.name="); err != nil || c.server.Authorizer != nil {
		t.Fatalf("authorizer.class.name= leaves it on: %v", err)
	}
	var d serveConfig
	if err := d.override("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"); err != nil || d.server.Authorizer == nil || d.server.Authorizer.AllowIfNoACL {
		t.Fatalf("authorizer.class.name: %v %+v", err, d.server.Authorizer)
	}
	for _, bad := range []string{"super.users=admin", "allow.everyone.if.no.acl.found=maybe"} {
		if err := d.override(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
