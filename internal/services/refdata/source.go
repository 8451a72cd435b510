package refdata

import "fmt"

// Source is where a service reads its reference data: from the in-memory
// replica or from Postgres on every request. It is a flag.Value.
type Source string

// Sources.
const (
	FromReplica  Source = "replica"  // memory, fed by logical replication (the default)
	FromPostgres Source = "postgres" // a query per read
)

// Set parses a --source flag.
func (s *Source) Set(v string) error {
	switch Source(v) {
	case FromReplica, FromPostgres:
		*s = Source(v)
		return nil
	}
	return fmt.Errorf("want replica or postgres")
}

func (s *Source) String() string { return string(*s) }
