package interop

import (
	stdlog "log"
	"os"
	"testing"

	"github.com/IBM/sarama"
)

// TestMain: SARAMA_LOG=1 prints sarama's log to stderr, to see what it asked
// and what it got.
func TestMain(m *testing.M) {
	if os.Getenv("SARAMA_LOG") != "" {
		sarama.Logger = stdlog.New(os.Stderr, "[sarama] ", stdlog.Lmicroseconds)
	}
	os.Exit(m.Run())
}
