package order

import (
	"context"
	"testing"
)

// TestChains: a hook derived from another tells it too, once, and a
// context without one is fine.
func TestChains(t *testing.T) {
	Placed(context.Background())
	var outer, inner int
	ctx := With(context.Background(), func() { outer++ })
	ctx2 := With(ctx, func() { inner++ })
	Placed(ctx2)
	Placed(ctx2)
	if inner != 1 || outer != 1 {
		t.Fatalf("inner %d, outer %d calls, want 1 and 1", inner, outer)
	}
	Placed(ctx)
	if outer != 1 {
		t.Fatalf("outer called %d times, want once", outer)
	}
}

// TestDetached: a hook under a detached context does not reach the one
// above it.
func TestDetached(t *testing.T) {
	var outer, inner int
	ctx := With(context.Background(), func() { outer++ })
	d := With(Detached(ctx), func() { inner++ })
	Placed(d)
	if inner != 1 || outer != 0 {
		t.Fatalf("inner %d, outer %d calls, want 1 and 0", inner, outer)
	}
	Placed(Detached(ctx))
	if outer != 0 {
		t.Fatal("Placed on a detached context reached its parent's hook")
	}
}
