package serve

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's OpenAPI 3.1 document (openapi.json), the contract
// the clients are written from. It is served at GET /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// serveOpenAPI answers GET /v1/openapi.json.
func serveOpenAPI(c *call) error {
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(http.StatusOK)
	_, _ = c.w.Write(OpenAPI)
	return nil
}
