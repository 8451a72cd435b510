package checker

import "errors"

// ErrConfig is wrapped by the errors Run returns for a Config it cannot
// run; the message says which setting and what to give instead.
var ErrConfig = errors.New("checker: bad configuration")
