package refdata

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/replica"
)

// col returns column name of r as a T. A missing column or another type is
// an error naming both, so a bad row is logged with what is wrong.
func col[T any](r replica.Row, name string) (T, error) {
	var zero T
	v, ok := r[name]
	if !ok || v == nil {
		return zero, fmt.Errorf("column %s is missing or NULL", name)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("column %s is %T, want %T", name, v, zero)
	}
	return t, nil
}

// cols decodes several columns, stopping at the first error.
type cols struct {
	r   replica.Row
	err error
}

func int32Col(c *cols, name string) int32    { return colOf[int32](c, name) }
func int64Col(c *cols, name string) int64    { return colOf[int64](c, name) }
func textCol(c *cols, name string) string    { return colOf[string](c, name) }
func timeCol(c *cols, name string) time.Time { return colOf[time.Time](c, name) }

func colOf[T any](c *cols, name string) T {
	var zero T
	if c.err != nil {
		return zero
	}
	v, err := col[T](c.r, name)
	c.err = err
	return v
}

// check records a validation failure unless an earlier error happened.
func (c *cols) check(ok bool, format string, args ...any) {
	if c.err == nil && !ok {
		c.err = fmt.Errorf(format, args...)
	}
}

func idKey(r replica.Row) (int32, error) { return col[int32](r, "id") }

func ruleKey(r replica.Row) (RuleKey, error) {
	c := &cols{r: r}
	k := RuleKey{CategoryID: int32Col(c, "category_id"), ZoneID: int32Col(c, "zone_id")}
	return k, c.err
}

// bp is a share in basis points: 0 to 100%.
func validBP(v int32) bool { return v >= 0 && v <= 10_000 }

// The decoders below turn a replicated row into a value and reject rows
// the services could not use (a negative price, an empty region): such a
// row is counted and logged with its key by the source, never applied.

// DecodeBrand decodes a brands row.
func DecodeBrand(r replica.Row) (Brand, error) {
	c := &cols{r: r}
	v := Brand{ID: int32Col(c, "id"), Name: textCol(c, "name"), MarkupBP: int32Col(c, "markup_bp")}
	c.check(validBP(v.MarkupBP), "markup_bp %d is not 0-10000", v.MarkupBP)
	return v, c.err
}

// DecodeCategory decodes a categories row.
func DecodeCategory(r replica.Row) (Category, error) {
	c := &cols{r: r}
	v := Category{ID: int32Col(c, "id"), Name: textCol(c, "name"), VATBP: int32Col(c, "vat_bp")}
	c.check(validBP(v.VATBP), "vat_bp %d is not 0-10000", v.VATBP)
	return v, c.err
}

// DecodeWarehouse decodes a warehouses row.
func DecodeWarehouse(r replica.Row) (Warehouse, error) {
	c := &cols{r: r}
	v := Warehouse{ID: int32Col(c, "id"), Name: textCol(c, "name"), HandlingCents: int64Col(c, "handling_cents")}
	c.check(v.HandlingCents >= 0, "handling_cents %d is negative", v.HandlingCents)
	return v, c.err
}

// DecodeZone decodes a zones row.
func DecodeZone(r replica.Row) (Zone, error) {
	c := &cols{r: r}
	v := Zone{ID: int32Col(c, "id"), Name: textCol(c, "name"), WarehouseID: int32Col(c, "warehouse_id"),
		BaseCents: int64Col(c, "base_cents"), PerKgCents: int64Col(c, "per_kg_cents")}
	c.check(v.BaseCents >= 0 && v.PerKgCents >= 0, "negative tariff %d + %d/kg", v.BaseCents, v.PerKgCents)
	return v, c.err
}

// DecodeGroup decodes a customer_groups row.
func DecodeGroup(r replica.Row) (Group, error) {
	c := &cols{r: r}
	v := Group{ID: int32Col(c, "id"), Name: textCol(c, "name"), DiscountBP: int32Col(c, "discount_bp")}
	c.check(validBP(v.DiscountBP), "discount_bp %d is not 0-10000", v.DiscountBP)
	return v, c.err
}

// DecodeCity decodes a cities row.
func DecodeCity(r replica.Row) (City, error) {
	c := &cols{r: r}
	v := City{ID: int32Col(c, "id"), Name: textCol(c, "name"), Region: textCol(c, "region"),
		ZoneID: int32Col(c, "zone_id"), GroupID: int32Col(c, "group_id")}
	return v, c.err
}

// DecodeRule decodes a price_rules row.
func DecodeRule(r replica.Row) (PriceRule, error) {
	c := &cols{r: r}
	v := PriceRule{CategoryID: int32Col(c, "category_id"), ZoneID: int32Col(c, "zone_id"), MarkupBP: int32Col(c, "markup_bp")}
	c.check(validBP(v.MarkupBP), "markup_bp %d is not 0-10000", v.MarkupBP)
	return v, c.err
}

// DecodeCustomer decodes a customers row. A customer without a region
// cannot be listed, so it is rejected.
func DecodeCustomer(r replica.Row) (Customer, error) {
	c := &cols{r: r}
	v := Customer{ID: int32Col(c, "id"), Name: textCol(c, "name"), Region: textCol(c, "region"),
		Email: textCol(c, "email"), Phone: textCol(c, "phone"),
		CreditLimitCents: int64Col(c, "credit_limit_cents"), UpdatedAt: timeCol(c, "updated_at")}
	c.check(v.Region != "", "empty region")
	c.check(v.Name != "", "empty name")
	return v, c.err
}

// table is what Replica needs of one replicated table, whatever its types.
type table struct {
	obs     replica.Observable // *replica.Table: name, stats, lag for metrics
	binding replica.Binding    // to a Postgres table
	doc     replica.Binding    // to a MongoDB collection of the same name (docRow)
	wait    func(context.Context) error
	fresh   func(now time.Time) error         // Table.FreshAt
	age     func(now time.Time) time.Duration // Table.AgeAt
}

// handle binds t for either source: key and decode read Postgres rows,
// and documents through docRow.
func handle[K comparable, V any](t *replica.Table[K, V], key func(replica.Row) (K, error), decode func(replica.Row) (V, error)) table {
	return table{obs: t, binding: replica.Bind(t, key, decode), doc: replica.Bind(t, fromDoc(key), fromDoc(decode)),
		wait: t.WaitReady, fresh: t.FreshAt, age: t.AgeAt}
}

// Set is a group of replicated tables one Replica keeps fresh: RefTables
// or Customers.
type Set interface {
	tables() []table
}

// RefTables are the seven reference tables of a price, in memory.
type RefTables struct {
	Brands     *replica.Table[int32, Brand]
	Categories *replica.Table[int32, Category]
	Warehouses *replica.Table[int32, Warehouse]
	Zones      *replica.Table[int32, Zone]
	Groups     *replica.Table[int32, Group]
	Cities     *replica.Table[int32, City]
	Rules      *replica.Table[RuleKey, PriceRule]
	all        []table
}

// NewRefTables returns the empty tables, bound for a source.
func NewRefTables() *RefTables {
	t := &RefTables{
		Brands:     replica.NewTable[int32, Brand](TableBrands),
		Categories: replica.NewTable[int32, Category](TableCategories),
		Warehouses: replica.NewTable[int32, Warehouse](TableWarehouses),
		Zones:      replica.NewTable[int32, Zone](TableZones),
		Groups:     replica.NewTable[int32, Group](TableGroups),
		Cities:     replica.NewTable[int32, City](TableCities),
		Rules:      replica.NewTable[RuleKey, PriceRule](TableRules),
	}
	t.all = []table{
		handle(t.Brands, idKey, DecodeBrand),
		handle(t.Categories, idKey, DecodeCategory),
		handle(t.Warehouses, idKey, DecodeWarehouse),
		handle(t.Zones, idKey, DecodeZone),
		handle(t.Groups, idKey, DecodeGroup),
		handle(t.Cities, idKey, DecodeCity),
		handle(t.Rules, ruleKey, DecodeRule),
	}
	return t
}

func (t *RefTables) tables() []table { return t.all }

// Customers is the catalog's customers table in memory, with its listing
// index (region, name, id).
type Customers struct {
	Table  *replica.Table[int32, Customer]
	Index  *replica.Index[int32, Customer]
	handle table
}

// NewCustomers returns the empty table and its index, bound for a source.
func NewCustomers() *Customers {
	t := replica.NewTable[int32, Customer](TableCustomers)
	c := &Customers{Table: t, Index: replica.NewIndex(t, CustomerLess)}
	c.handle = handle(t, idKey, DecodeCustomer)
	return c
}

func (c *Customers) tables() []table { return []table{c.handle} }
