package refdata

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/defaults"
)

// Size is how much data the seed makes. The seven reference tables have
// fixed, small sizes (RefSizes); products and customers scale.
type Size struct {
	Products  int // default 100,000
	Customers int // default 20,000
}

// Default sizes: a few MB of customers, as the report's catalog.
const (
	DefaultProducts  = 100_000
	DefaultCustomers = 20_000
)

// Sizes of the reference tables; every product, city and category-zone
// pair has its references, so every (product, city) pair has a price.
const (
	NumBrands     = 300
	NumCategories = 120
	NumWarehouses = 12
	NumZones      = 24
	NumGroups     = 8
	NumCities     = 1000
	NumRules      = NumCategories * NumZones
)

func (s *Size) setDefaults() {
	defaults.Positive(&s.Products, DefaultProducts)
	defaults.Positive(&s.Customers, DefaultCustomers)
}

// Regions are the regions cities and customers belong to.
var Regions = []string{
	"Altai", "Amur", "Arkhangelsk", "Astrakhan", "Bashkortostan", "Belgorod", "Bryansk", "Chelyabinsk",
	"Irkutsk", "Kaliningrad", "Kaluga", "Kamchatka", "Kazan", "Kemerovo", "Khabarovsk", "Krasnodar",
	"Krasnoyarsk", "Kursk", "Leningrad", "Moscow", "Murmansk", "Novgorod", "Novosibirsk", "Omsk",
	"Perm", "Primorye", "Rostov", "Samara", "Saratov", "Sverdlovsk", "Tver", "Yaroslavl",
}

// Dataset is a generated seed.
type Dataset struct {
	Brands     []Brand
	Categories []Category
	Warehouses []Warehouse
	Zones      []Zone
	Groups     []Group
	Cities     []City
	Rules      []PriceRule
	Products   []Product
	Customers  []Customer
}

// seed makes Generate deterministic: the same size gives the same data.
const seed = 20240417

var (
	syllables = []string{"al", "bor", "vel", "dan", "mir", "ko", "ra", "sen", "tor", "lin", "grad", "ost", "nov", "yar", "kam", "zel"}
	nouns     = []string{"Trade", "Steel", "Foods", "Logistics", "Textile", "Agro", "Build", "Pharma", "Energy", "Motors", "Paper", "Glass"}
	forms     = []string{"LLC", "JSC", "Group", "Holding", "Partners"}
)

func word(r *rand.Rand, parts int) string {
	var b strings.Builder
	for range parts {
		b.WriteString(syllables[r.IntN(len(syllables))])
	}
	s := b.String()
	return strings.ToUpper(s[:1]) + s[1:]
}

// Generate makes a dataset of the given size (zero fields: defaults).
func Generate(size Size) *Dataset {
	size.setDefaults()
	r := rand.New(rand.NewPCG(seed, uint64(size.Products)<<32|uint64(size.Customers)))
	d := &Dataset{}
	for i := range NumBrands {
		d.Brands = append(d.Brands, Brand{ID: int32(i + 1), Name: word(r, 3), MarkupBP: int32(r.IntN(3000))})
	}
	vat := []int32{0, 1000, 2000}
	for i := range NumCategories {
		d.Categories = append(d.Categories, Category{ID: int32(i + 1), Name: word(r, 2) + " goods", VATBP: vat[r.IntN(len(vat))]})
	}
	for i := range NumWarehouses {
		d.Warehouses = append(d.Warehouses, Warehouse{ID: int32(i + 1), Name: "Warehouse " + word(r, 2), HandlingCents: int64(5000 + r.IntN(20000))})
	}
	for i := range NumZones {
		d.Zones = append(d.Zones, Zone{ID: int32(i + 1), Name: fmt.Sprintf("Zone %d", i+1), WarehouseID: int32(i%NumWarehouses + 1),
			BaseCents: int64(10000 + r.IntN(50000)), PerKgCents: int64(1000 + r.IntN(9000))})
	}
	for i := range NumGroups {
		d.Groups = append(d.Groups, Group{ID: int32(i + 1), Name: fmt.Sprintf("Group %c", 'A'+i), DiscountBP: int32(i * 250)})
	}
	for i := range NumCities {
		d.Cities = append(d.Cities, City{ID: int32(i + 1), Name: word(r, 2) + "sk", Region: Regions[r.IntN(len(Regions))],
			ZoneID: int32(r.IntN(NumZones) + 1), GroupID: int32(r.IntN(NumGroups) + 1)})
	}
	for c := range NumCategories {
		for z := range NumZones {
			d.Rules = append(d.Rules, PriceRule{CategoryID: int32(c + 1), ZoneID: int32(z + 1), MarkupBP: int32(r.IntN(2500))})
		}
	}
	for i := range size.Products {
		d.Products = append(d.Products, Product{ID: int32(i + 1), Name: word(r, 3) + " " + nouns[r.IntN(len(nouns))],
			BrandID: int32(r.IntN(NumBrands) + 1), CategoryID: int32(r.IntN(NumCategories) + 1),
			WeightG: int32(50 + r.IntN(30000)), BaseCents: int64(1000 + r.IntN(10_000_000))})
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range size.Customers {
		id := int32(i + 1)
		name := fmt.Sprintf("%s %s %s", word(r, 2+r.IntN(2)), nouns[r.IntN(len(nouns))], forms[r.IntN(len(forms))])
		d.Customers = append(d.Customers, Customer{ID: id, Name: name, Region: Regions[r.IntN(len(Regions))],
			Email:            fmt.Sprintf("orders%d@%s.example", id, strings.ToLower(word(r, 2))),
			Phone:            fmt.Sprintf("+7 9%02d %03d-%02d-%02d", r.IntN(100), r.IntN(1000), r.IntN(100), r.IntN(100)),
			CreditLimitCents: int64(r.IntN(100_000)) * 10_000, UpdatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	return d
}

// Copier copies rows into a table: a pgx.Tx, *pgx.Conn or *pgxpool.Pool.
type Copier interface {
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
}

// Load copies the dataset into the (empty) tables, referenced tables first.
func (d *Dataset) Load(ctx context.Context, db Copier) error {
	type load struct {
		table string
		cols  []string
		rows  [][]any
	}
	var loads []load
	add := func(table string, cols []string, n int, row func(i int) []any) {
		rows := make([][]any, n)
		for i := range rows {
			rows[i] = row(i)
		}
		loads = append(loads, load{table, cols, rows})
	}
	add(TableBrands, []string{"id", "name", "markup_bp"}, len(d.Brands), func(i int) []any {
		b := d.Brands[i]
		return []any{b.ID, b.Name, b.MarkupBP}
	})
	add(TableCategories, []string{"id", "name", "vat_bp"}, len(d.Categories), func(i int) []any {
		c := d.Categories[i]
		return []any{c.ID, c.Name, c.VATBP}
	})
	add(TableWarehouses, []string{"id", "name", "handling_cents"}, len(d.Warehouses), func(i int) []any {
		w := d.Warehouses[i]
		return []any{w.ID, w.Name, w.HandlingCents}
	})
	add(TableZones, []string{"id", "name", "warehouse_id", "base_cents", "per_kg_cents"}, len(d.Zones), func(i int) []any {
		z := d.Zones[i]
		return []any{z.ID, z.Name, z.WarehouseID, z.BaseCents, z.PerKgCents}
	})
	add(TableGroups, []string{"id", "name", "discount_bp"}, len(d.Groups), func(i int) []any {
		g := d.Groups[i]
		return []any{g.ID, g.Name, g.DiscountBP}
	})
	add(TableCities, []string{"id", "name", "region", "zone_id", "group_id"}, len(d.Cities), func(i int) []any {
		c := d.Cities[i]
		return []any{c.ID, c.Name, c.Region, c.ZoneID, c.GroupID}
	})
	add(TableRules, []string{"category_id", "zone_id", "markup_bp"}, len(d.Rules), func(i int) []any {
		r := d.Rules[i]
		return []any{r.CategoryID, r.ZoneID, r.MarkupBP}
	})
	add(TableProducts, []string{"id", "name", "brand_id", "category_id", "weight_g", "base_cents"}, len(d.Products), func(i int) []any {
		p := d.Products[i]
		return []any{p.ID, p.Name, p.BrandID, p.CategoryID, p.WeightG, p.BaseCents}
	})
	add(TableCustomers, []string{"id", "name", "region", "email", "phone", "credit_limit_cents", "updated_at"}, len(d.Customers), func(i int) []any {
		c := d.Customers[i]
		return []any{c.ID, c.Name, c.Region, c.Email, c.Phone, c.CreditLimitCents, c.UpdatedAt}
	})
	for _, l := range loads {
		if _, err := db.CopyFrom(ctx, pgx.Identifier{l.table}, l.cols, pgx.CopyFromRows(l.rows)); err != nil {
			return fmt.Errorf("refdata: load %s: %w", l.table, err)
		}
	}
	return nil
}
