package clocktest_test

import (
	"fmt"
	"time"

	"github.com/strata-log/strata/clock/clocktest"
)

func ExampleClock() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktest.New(start)
	clk.AfterFunc(2*time.Second, func() { fmt.Println("session expired at", clk.Now().Sub(start)) })
	linger := clk.NewTimer(time.Second)

	clk.Advance(5 * time.Second) // fires both, in due order, each at its due time
	fmt.Println("linger fired at", (<-linger.C()).Sub(start))
	fmt.Println("now", clk.Now().Sub(start), "pending", clk.Pending())
	// Output:
	// session expired at 2s
	// linger fired at 1s
	// now 5s pending 0
}
