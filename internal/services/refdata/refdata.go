// Package refdata is the data behind report B's services (pricing and
// catalog): the Postgres schema, a deterministic seed generator, the
// decoders that turn replicated rows into Go values, the in-memory
// replica tables bound to them, and the Postgres pool both services use.
//
// Eight entities make a price: a product and seven small reference tables
// (brands, categories, cities with their region, logistics zones,
// warehouses, customer groups, price rules). The catalog is a table of
// wholesale customers, listed by region in name order.
//
// The replica side is built on package replica: RefTables and Customers
// each bind their tables; Replica runs one PostgresSource over them and
// exposes its health (readiness, decode errors, resyncs, commit-to-visible
// lag) as Prometheus metrics.
package refdata
