// Package httpjson answers an HTTP request with JSON. One copy for the programs that the
// end-to-end suites run in pods (e2e/support/README.md).
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write answers with `status` and v as JSON (Content-Type: application/json). An error in
// encoding v, or in sending it, is dropped: the status is already sent.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
