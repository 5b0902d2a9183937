package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// saslState is a connection's progress through authentication.
type saslState struct {
	done bool
}

// authenticate handles a request of a connection that has not
// authenticated yet; false closes the connection.
func (c *conn) authenticate(h header, req kmsg.Request) bool {
	c.logger.Warn("kafka: closing connection: authentication required", "api", kmsg.NameForKey(h.key))
	return false
}

// SCRAMCredential is what a server keeps of a SCRAM user's password (RFC
// 5802): never the password itself.
type SCRAMCredential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}
