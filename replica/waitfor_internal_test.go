package replica

import (
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestPastPageHeader: an insert position just past a page header is
// moved back to the page's start, where the record before it ended;
// others are kept.
func TestPastPageHeader(t *testing.T) {
	const page, segment = 8192, 16 << 20
	for _, tt := range []struct{ in, want pglogrepl.LSN }{
		{3*page + walShortPageHeader, 3 * page},
		{5*segment + walLongPageHeader, 5 * segment},
		{3*page + walShortPageHeader + 8, 3*page + walShortPageHeader + 8},
		{3*page + walLongPageHeader, 3*page + walLongPageHeader}, // mid-page on a page that is not a segment's first
		{0x16B3748, 0x16B3748},
	} {
		if got := pastPageHeader(tt.in, page, segment); got != tt.want {
			t.Errorf("pastPageHeader(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
