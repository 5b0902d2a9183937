package acl_test

import (
	"fmt"

	"github.com/strata-log/strata/acl"
)

func ExampleDecide() {
	set, err := acl.NewSet([]acl.Binding{
		// Every user may read the topics whose names begin with "public.".
		{ResourceType: acl.ResourceTopic, ResourceName: "public.", PatternType: acl.PatternPrefixed,
			Principal: acl.WildcardPrincipal, Host: acl.WildcardHost, Operation: acl.OpRead, Permission: acl.PermissionAllow},
		// But not bob.
		{ResourceType: acl.ResourceTopic, ResourceName: "public.", PatternType: acl.PatternPrefixed,
			Principal: acl.User("bob"), Host: acl.WildcardHost, Operation: acl.OpAll, Permission: acl.PermissionDeny},
	})
	if err != nil {
		panic(err)
	}
	cfg := acl.Config{SuperUsers: []string{acl.User("admin")}}
	for _, r := range []acl.Request{
		{Principal: acl.User("alice"), Host: "10.0.0.7", Operation: acl.OpRead, Resource: acl.Topic("public.prices")},
		{Principal: acl.User("alice"), Host: "10.0.0.7", Operation: acl.OpDescribe, Resource: acl.Topic("public.prices")},
		{Principal: acl.User("alice"), Host: "10.0.0.7", Operation: acl.OpWrite, Resource: acl.Topic("public.prices")},
		{Principal: acl.User("bob"), Host: "10.0.0.8", Operation: acl.OpRead, Resource: acl.Topic("public.prices")},
		{Principal: acl.User("alice"), Host: "10.0.0.7", Operation: acl.OpRead, Resource: acl.Topic("payroll")},
		{Principal: acl.User("admin"), Host: "10.0.0.9", Operation: acl.OpDelete, Resource: acl.Topic("payroll")},
	} {
		d := acl.Decide(cfg, set, r)
		fmt.Printf("%s %s %s: %v (%s)\n", r.Principal, r.Operation, r.Resource.Name, d.Allowed, d.Reason)
	}
	// Output:
	// User:alice READ public.prices: true (allow binding)
	// User:alice DESCRIBE public.prices: true (allow binding)
	// User:alice WRITE public.prices: false (no binding allows)
	// User:bob READ public.prices: false (deny binding)
	// User:alice READ payroll: false (no binding for the resource)
	// User:admin DELETE payroll: true (super user)
}
