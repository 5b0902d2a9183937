package prometheus_test

import (
	"fmt"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/strata-log/strata/metrics"
	strataprom "github.com/strata-log/strata/metrics/prometheus"
)

// Register a Strata Recorder with a registry of the program's own. With a
// broker, the snapshot function runs logmetrics.Collect first, so that the
// polled gauges are fresh at each scrape.
func ExampleNewCollector() {
	rec := metrics.NewRecorder()
	reg := prom.NewRegistry()
	reg.MustRegister(strataprom.NewCollector(func() metrics.Snapshot {
		// logmetrics.Collect(broker, rec) would go here
		return rec.Snapshot()
	}))
	rec.Produced("orders", 10, 1200)

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() == "kafka_server_brokertopicmetrics_bytesin_total" {
			fmt.Println(f.GetName(), f.Metric[0].GetCounter().GetValue())
		}
	}
	// Output: kafka_server_brokertopicmetrics_bytesin_total 1200
}
