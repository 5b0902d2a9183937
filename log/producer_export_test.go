package log

// ProducerBuiltPath returns the BuiltProducer p sends its batches through,
// nil when it sends them by ProduceBatch (for the external tests).
func ProducerBuiltPath(p *Producer) BuiltProducer { return p.broker }
