package tp

import "crypto/sha256"

// TopicID is the id a topic is known by in the Kafka protocol (Metadata
// v10+, Fetch v13+, the consumer group records): derived from its name, so
// that every node over the same topics gives the same ids. A topic
// deleted and created again keeps its id: Strata has no topic
// incarnations. Never the zero id, which means "no id".
func TopicID(name string) [16]byte {
	sum := sha256.Sum256([]byte("strata topic id\x00" + name))
	var id [16]byte
	copy(id[:], sum[:16])
	if id == ([16]byte{}) {
		id[0] = 1
	}
	return id
}
