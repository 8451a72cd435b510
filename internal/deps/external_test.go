package deps

import "testing"

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"postgres://user:s3cret@db:5432/app?sslmode=disable", "postgres://user:***@db:5432/app?sslmode=disable"},
		{"postgres://user@db/app", "postgres://user@db/app"},
		{"postgres://db/app?user=u&password=s3cret", "postgres://db/app?password=***&user=u"},
		{"postgres://user:p%40ss@db/app", "postgres://user:***@db/app"},
		{"%zz", "(an unparsable URL)"},
	} {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParsePostgresURL(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"postgres://u:p@h:5432/db", true},
		{"postgresql://h/db", true},
		{"host=h user=u", false},
		{"h:5432", false},
		{"http://h/db", false},
	} {
		if _, err := ParsePostgresURL(tt.in); (err == nil) != tt.ok {
			t.Errorf("ParsePostgresURL(%q): %v", tt.in, err)
		}
	}
}
