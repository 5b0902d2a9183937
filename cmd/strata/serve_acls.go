package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-log/strata/acl"
)

// aclOverrideKeys are the authorizer's settings serve takes with
// --override, Kafka's names.
var aclOverrideKeys = []string{"authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found"}

// aclOverride applies one of the authorizer's settings; false if k is not
// one. Any of them turns the authorizer on (Kafka needs
// authorizer.class.name, whose value Strata does not read: it has one
// authorizer); authorizer.class.name= (empty) turns it off.
func (c *serveConfig) aclOverride(k, v string) (bool, error) {
	on := func() *acl.Config {
		if c.server.Authorizer == nil {
			c.server.Authorizer = &acl.Config{}
		}
		return c.server.Authorizer
	}
	switch k {
	case "authorizer.class.name":
		if strings.TrimSpace(v) == "" {
			c.server.Authorizer = nil
		} else {
			on()
		}
	case "super.users":
		// Kafka's list: principals separated by semicolons.
		var users []string
		for _, p := range strings.Split(v, ";") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if _, _, err := acl.ParsePrincipal(p); err != nil {
				return true, fmt.Errorf("%s: %v (want User:NAME;User:NAME)", k, err)
			}
			users = append(users, p)
		}
		on().SuperUsers = users
	case "allow.everyone.if.no.acl.found":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return true, fmt.Errorf("%s: want true or false", k)
		}
		on().AllowIfNoACL = b
	default:
		return false, nil
	}
	return true, nil
}
