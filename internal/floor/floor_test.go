package floor

import (
	"testing"

	"github.com/strata-log/strata/internal/leaktest"
)

func TestListener(t *testing.T) {
	leaktest.Check(t)
	for range 3 {
		if err := Listener(); err != nil {
			t.Fatal(err)
		}
	}
}
