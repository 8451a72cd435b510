package refdata

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema creates the tables if they do not exist. Listings sort names with
// COLLATE "C" so that Postgres orders them as Go compares strings.
const Schema = `
CREATE TABLE IF NOT EXISTS brands (
	id int PRIMARY KEY, name text NOT NULL, markup_bp int NOT NULL);
CREATE TABLE IF NOT EXISTS categories (
	id int PRIMARY KEY, name text NOT NULL, vat_bp int NOT NULL);
CREATE TABLE IF NOT EXISTS warehouses (
	id int PRIMARY KEY, name text NOT NULL, handling_cents bigint NOT NULL);
CREATE TABLE IF NOT EXISTS zones (
	id int PRIMARY KEY, name text NOT NULL, warehouse_id int NOT NULL REFERENCES warehouses,
	base_cents bigint NOT NULL, per_kg_cents bigint NOT NULL);
CREATE TABLE IF NOT EXISTS customer_groups (
	id int PRIMARY KEY, name text NOT NULL, discount_bp int NOT NULL);
CREATE TABLE IF NOT EXISTS cities (
	id int PRIMARY KEY, name text NOT NULL, region text NOT NULL,
	zone_id int NOT NULL REFERENCES zones, group_id int NOT NULL REFERENCES customer_groups);
CREATE TABLE IF NOT EXISTS price_rules (
	category_id int REFERENCES categories, zone_id int REFERENCES zones, markup_bp int NOT NULL,
	PRIMARY KEY (category_id, zone_id));
CREATE TABLE IF NOT EXISTS products (
	id int PRIMARY KEY, name text NOT NULL, brand_id int NOT NULL REFERENCES brands,
	category_id int NOT NULL REFERENCES categories, weight_g int NOT NULL, base_cents bigint NOT NULL);
CREATE TABLE IF NOT EXISTS customers (
	id int PRIMARY KEY, name text NOT NULL, region text NOT NULL, email text NOT NULL,
	phone text NOT NULL, credit_limit_cents bigint NOT NULL, updated_at timestamptz NOT NULL);
CREATE INDEX IF NOT EXISTS customers_region_name ON customers (region, name COLLATE "C", id);
`

// RefTableNames are the seven reference tables of a price, in the order
// they load (referenced tables first).
var RefTableNames = []string{TableBrands, TableCategories, TableWarehouses, TableZones, TableGroups, TableCities, TableRules}

// Init creates the schema and, when the products table is empty, loads
// the seed of size. It is safe to run from several processes at once (an
// advisory lock serializes them) and does nothing on a seeded database.
func Init(ctx context.Context, pool *pgxpool.Pool, size Size) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(7240417)"); err != nil {
			return fmt.Errorf("refdata: init lock: %w", err)
		}
		if _, err := tx.Exec(ctx, Schema); err != nil {
			return fmt.Errorf("refdata: create schema: %w", err)
		}
		var seeded bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM products)").Scan(&seeded); err != nil {
			return fmt.Errorf("refdata: check seed: %w", err)
		}
		if seeded {
			return nil
		}
		return Generate(size).Load(ctx, tx)
	})
}
