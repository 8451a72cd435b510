package refdata

import "fmt"

// Source is where a service reads its reference data: from the in-memory
// replica (fed by Postgres or by MongoDB) or from Postgres on every
// request. It is a flag.Value.
type Source string

// Sources.
const (
	FromReplica  Source = "replica"  // memory, fed by logical replication (the default)
	FromPostgres Source = "postgres" // a query per read
	// FromMongo is memory, fed by MongoDB change streams (Config.Mongo):
	// the report's own source.
	FromMongo Source = "mongo"
)

// Set parses a --source flag.
func (s *Source) Set(v string) error {
	switch Source(v) {
	case FromReplica, FromPostgres, FromMongo:
		*s = Source(v)
		return nil
	}
	return fmt.Errorf("want replica, postgres or mongo")
}

func (s *Source) String() string { return string(*s) }
