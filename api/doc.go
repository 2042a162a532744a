// Package api holds Corral's OpenAPI description: the gateway's HTTP
// surface (the cached and coalesced model endpoints, the /v1 proxy, health,
// readiness, metrics and admin endpoints), the request controls and
// response headers, and the errors Corral produces.
//
// The document is openapi.yaml in this directory; [OpenAPI] embeds it so
// the server can serve it without reading the file system.
package api

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document in openapi.yaml, as YAML bytes.
//
//go:embed openapi.yaml
var OpenAPI []byte
