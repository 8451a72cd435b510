package pricing

import "github.com/highload-lab/hlab/internal/services/refdata"

// Inputs are the eight entities a price is made of.
type Inputs struct {
	Product   refdata.Product
	Brand     refdata.Brand
	Category  refdata.Category
	City      refdata.City
	Zone      refdata.Zone
	Warehouse refdata.Warehouse
	Group     refdata.Group
	Rule      refdata.PriceRule
}

// Quote is a computed price with its parts, in kopecks.
type Quote struct {
	Product     int32  `json:"product"`
	City        int32  `json:"city"`
	Region      string `json:"region"`
	Zone        int32  `json:"zone"`
	Warehouse   int32  `json:"warehouse"`
	Group       int32  `json:"group"`
	Currency    string `json:"currency"`
	Base        int64  `json:"base"`
	BrandMarkup int64  `json:"brand_markup"`
	RuleMarkup  int64  `json:"rule_markup"`
	Discount    int64  `json:"discount"`
	Shipping    int64  `json:"shipping"`
	Handling    int64  `json:"handling"`
	VAT         int64  `json:"vat"`
	Price       int64  `json:"price"`
}

// share is bp basis points of x, rounded half up (x, bp >= 0).
func share(x int64, bp int32) int64 { return (x*int64(bp) + 5000) / 10_000 }

// Compute prices a product in a city: the base price with the brand's
// and the category-zone rule's markups, less the city's customer-group
// discount, plus shipping by weight in the zone and the warehouse's
// handling, plus the category's VAT on it all.
func Compute(in Inputs) Quote {
	q := Quote{
		Product: in.Product.ID, City: in.City.ID, Region: in.City.Region, Zone: in.Zone.ID,
		Warehouse: in.Warehouse.ID, Group: in.Group.ID, Currency: "RUB", Base: in.Product.BaseCents,
	}
	goods := q.Base
	q.BrandMarkup = share(goods, in.Brand.MarkupBP)
	goods += q.BrandMarkup
	q.RuleMarkup = share(goods, in.Rule.MarkupBP)
	goods += q.RuleMarkup
	q.Discount = share(goods, in.Group.DiscountBP)
	goods -= q.Discount
	q.Shipping = in.Zone.BaseCents + (in.Zone.PerKgCents*int64(in.Product.WeightG)+500)/1000
	q.Handling = in.Warehouse.HandlingCents
	net := goods + q.Shipping + q.Handling
	q.VAT = share(net, in.Category.VATBP)
	q.Price = net + q.VAT
	return q
}
