package rootdir

import (
	"os/user"
	"strconv"
)

// userName names uid for an error message ("?" when unknown).
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return "?"
}
