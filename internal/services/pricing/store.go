package pricing

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/services/refdata"
)

// store gathers a price's eight entities.
type store interface {
	inputs(ctx context.Context, product, city int32) (Inputs, error)
}

// The queries of the Postgres-backed store: one per entity, as a service
// that reads everything from the database does (the report's "before").
const (
	qProduct   = "SELECT id, name, brand_id, category_id, weight_g, base_cents FROM products WHERE id = $1"
	qBrand     = "SELECT id, name, markup_bp FROM brands WHERE id = $1"
	qCategory  = "SELECT id, name, vat_bp FROM categories WHERE id = $1"
	qCity      = "SELECT id, name, region, zone_id, group_id FROM cities WHERE id = $1"
	qZone      = "SELECT id, name, warehouse_id, base_cents, per_kg_cents FROM zones WHERE id = $1"
	qWarehouse = "SELECT id, name, handling_cents FROM warehouses WHERE id = $1"
	qGroup     = "SELECT id, name, discount_bp FROM customer_groups WHERE id = $1"
	qRule      = "SELECT category_id, zone_id, markup_bp FROM price_rules WHERE category_id = $1 AND zone_id = $2"
)

// row runs one single-row query. A missing row is ErrNotFound when the
// client asked for it (product, city) and a broken reference otherwise.
func row(ctx context.Context, pool *pgxpool.Pool, asked bool, what string, sql string, args []any, dst ...any) error {
	err := pool.QueryRow(ctx, sql, args...).Scan(dst...)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows) && asked:
		return fmt.Errorf("%w: %s %v", ErrNotFound, what, args[0])
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pricing: %s %v is referenced but missing", what, args)
	}
	return fmt.Errorf("%w: %s: %w", ErrDatabase, what, err)
}

func queryProduct(ctx context.Context, pool *pgxpool.Pool, id int32) (refdata.Product, error) {
	var p refdata.Product
	err := row(ctx, pool, true, "product", qProduct, []any{id}, &p.ID, &p.Name, &p.BrandID, &p.CategoryID, &p.WeightG, &p.BaseCents)
	return p, err
}

// pgStore reads all eight entities from Postgres: eight queries.
type pgStore struct{ pool *pgxpool.Pool }

func (s pgStore) inputs(ctx context.Context, product, city int32) (in Inputs, err error) {
	if in.Product, err = queryProduct(ctx, s.pool, product); err != nil {
		return in, err
	}
	if err = row(ctx, s.pool, true, "city", qCity, []any{city}, &in.City.ID, &in.City.Name, &in.City.Region, &in.City.ZoneID, &in.City.GroupID); err != nil {
		return in, err
	}
	p, c := &in.Product, &in.City
	steps := []struct {
		what string
		sql  string
		args []any
		dst  []any
	}{
		{"brand", qBrand, []any{p.BrandID}, []any{&in.Brand.ID, &in.Brand.Name, &in.Brand.MarkupBP}},
		{"category", qCategory, []any{p.CategoryID}, []any{&in.Category.ID, &in.Category.Name, &in.Category.VATBP}},
		{"zone", qZone, []any{c.ZoneID}, []any{&in.Zone.ID, &in.Zone.Name, &in.Zone.WarehouseID, &in.Zone.BaseCents, &in.Zone.PerKgCents}},
		{"customer group", qGroup, []any{c.GroupID}, []any{&in.Group.ID, &in.Group.Name, &in.Group.DiscountBP}},
		{"price rule", qRule, []any{p.CategoryID, c.ZoneID}, []any{&in.Rule.CategoryID, &in.Rule.ZoneID, &in.Rule.MarkupBP}},
	}
	for _, st := range steps {
		if err = row(ctx, s.pool, false, st.what, st.sql, st.args, st.dst...); err != nil {
			return in, err
		}
	}
	// The warehouse comes from the zone, so it is asked for last.
	err = row(ctx, s.pool, false, "warehouse", qWarehouse, []any{in.Zone.WarehouseID}, &in.Warehouse.ID, &in.Warehouse.Name, &in.Warehouse.HandlingCents)
	return in, err
}

// replicaStore reads the seven reference entities from memory and only
// the product from Postgres: one query (the report's "after").
type replicaStore struct {
	pool *pgxpool.Pool
	ref  *refdata.RefTables
	rep  *refdata.Replica
}

func (s replicaStore) inputs(ctx context.Context, product, city int32) (in Inputs, err error) {
	if err := s.rep.Check(errs); err != nil {
		return in, err
	}
	var ok bool
	if in.City, ok = s.ref.Cities.Get(city); !ok {
		return in, fmt.Errorf("%w: city %d", ErrNotFound, city)
	}
	if in.Product, err = queryProduct(ctx, s.pool, product); err != nil {
		return in, err
	}
	p, c := &in.Product, &in.City
	missing := func(what string, id any) error { return fmt.Errorf("%w: %s %v", ErrStale, what, id) }
	if in.Brand, ok = s.ref.Brands.Get(p.BrandID); !ok {
		return in, missing("brand", p.BrandID)
	}
	if in.Category, ok = s.ref.Categories.Get(p.CategoryID); !ok {
		return in, missing("category", p.CategoryID)
	}
	if in.Zone, ok = s.ref.Zones.Get(c.ZoneID); !ok {
		return in, missing("zone", c.ZoneID)
	}
	if in.Group, ok = s.ref.Groups.Get(c.GroupID); !ok {
		return in, missing("customer group", c.GroupID)
	}
	key := refdata.RuleKey{CategoryID: p.CategoryID, ZoneID: c.ZoneID}
	if in.Rule, ok = s.ref.Rules.Get(key); !ok {
		return in, missing("price rule", key)
	}
	if in.Warehouse, ok = s.ref.Warehouses.Get(in.Zone.WarehouseID); !ok {
		return in, missing("warehouse", in.Zone.WarehouseID)
	}
	return in, nil
}
