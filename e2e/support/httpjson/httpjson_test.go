package httpjson

import (
	"net/http/httptest"
	"testing"
)

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, 409, map[string]string{"error": "Conflict"})
	if rec.Code != 409 {
		t.Errorf("status %d, want 409", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if body, want := rec.Body.String(), "{\"error\":\"Conflict\"}\n"; body != want {
		t.Errorf("body %q, want %q", body, want)
	}
}
