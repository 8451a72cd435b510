package tasks

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPI is the API's OpenAPI 3 description. The tests hold it against
// routeTable (every route described, nothing described that is not
// served) and validate real requests and answers against it.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3 description (JSON), as GET
// /openapi.json serves it.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// serveOpenAPI answers GET /openapi.json, to anyone: the description
// holds nothing that the routes do not tell.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("Content-Length", strconv.Itoa(len(openAPI)))
	w.Write(openAPI)
}
