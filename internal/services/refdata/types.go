package refdata

import "time"

// Table names in Postgres (schema public).
const (
	TableBrands     = "brands"
	TableCategories = "categories"
	TableCities     = "cities"
	TableZones      = "zones"
	TableWarehouses = "warehouses"
	TableGroups     = "customer_groups"
	TableRules      = "price_rules"
	TableProducts   = "products"
	TableCustomers  = "customers"
)

// Money is in kopecks (cents); shares are in basis points (1/100 of a
// percent), so prices are exact integers.

// Brand is a product's brand; its markup applies to the base price.
type Brand struct {
	ID       int32  `json:"id"`
	Name     string `json:"name"`
	MarkupBP int32  `json:"markup_bp"`
}

// Category is a product's category; its VAT rate applies last.
type Category struct {
	ID    int32  `json:"id"`
	Name  string `json:"name"`
	VATBP int32  `json:"vat_bp"`
}

// City is where a price is asked for: its region, the logistics zone that
// delivers there, and the customer group whose discount applies there.
type City struct {
	ID      int32  `json:"id"`
	Name    string `json:"name"`
	Region  string `json:"region"`
	ZoneID  int32  `json:"zone_id"`
	GroupID int32  `json:"group_id"`
}

// Zone is a logistics zone: its shipping tariff and the warehouse serving it.
type Zone struct {
	ID          int32  `json:"id"`
	Name        string `json:"name"`
	WarehouseID int32  `json:"warehouse_id"`
	BaseCents   int64  `json:"base_cents"`
	PerKgCents  int64  `json:"per_kg_cents"`
}

// Warehouse ships goods; it charges for handling.
type Warehouse struct {
	ID            int32  `json:"id"`
	Name          string `json:"name"`
	HandlingCents int64  `json:"handling_cents"`
}

// Group is a customer group with its discount.
type Group struct {
	ID         int32  `json:"id"`
	Name       string `json:"name"`
	DiscountBP int32  `json:"discount_bp"`
}

// RuleKey is a price rule's primary key.
type RuleKey struct {
	CategoryID int32
	ZoneID     int32
}

// PriceRule is the markup of a category in a zone.
type PriceRule struct {
	CategoryID int32 `json:"category_id"`
	ZoneID     int32 `json:"zone_id"`
	MarkupBP   int32 `json:"markup_bp"`
}

// Key is the rule's primary key.
func (r PriceRule) Key() RuleKey { return RuleKey{r.CategoryID, r.ZoneID} }

// Product is the one large entity of a price: it stays in Postgres.
type Product struct {
	ID         int32  `json:"id"`
	Name       string `json:"name"`
	BrandID    int32  `json:"brand_id"`
	CategoryID int32  `json:"category_id"`
	WeightG    int32  `json:"weight_g"`
	BaseCents  int64  `json:"base_cents"`
}

// Customer is a wholesale customer of the catalog.
type Customer struct {
	ID               int32     `json:"id"`
	Name             string    `json:"name"`
	Region           string    `json:"region"`
	Email            string    `json:"email"`
	Phone            string    `json:"phone"`
	CreditLimitCents int64     `json:"credit_limit_cents"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// CustomerLess orders customers by region, then name, then id: the
// catalog's listing order. Names compare bytewise, as Postgres's "C"
// collation does, so the replica and the database list alike.
func CustomerLess(a, b Customer) bool {
	if a.Region != b.Region {
		return a.Region < b.Region
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.ID < b.ID
}
