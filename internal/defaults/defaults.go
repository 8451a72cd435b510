// Package defaults fills a Config's unset numbers, the one way every
// setDefaults does it.
//
// For strings and other fields where only the zero value means "unset",
// use cmp.Or. For counts, sizes and durations a negative value is as
// meaningless as zero, so Positive replaces both; a field where a negative
// number means something ("none") handles that itself first.
package defaults

// Number is what Positive fills: counts, sizes, rates and durations
// (time.Duration is an int64).
type Number interface {
	~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64 | ~float64
}

// Positive sets *v to d when *v is zero or negative.
func Positive[T Number](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
