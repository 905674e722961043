package dynamostore

// KeepPayloadsInline makes s keep every payload and checkpoint in its
// job's item, as stores did before payload items: for the
// before-and-after figures.
func KeepPayloadsInline(s *Store) { s.inline = true }
