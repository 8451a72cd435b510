package labresult

// Key identifies a row within its experiment: declared once by the
// experiment, stable across runs and versions, and never shown as prose
// (the row's Label is). Claims, gates, targets and "hlab lab compare"
// join rows on it, so rewording a label breaks none of them.
//
// A key is short and made of lower-case words joined by '-' or '/', with
// the setup's parameters in it where rows differ by them:
// "one/c1", "catalog/replica/c100", "fault/broker-outage".
type Key string
