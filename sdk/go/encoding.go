package kshard

import (
	"encoding/json"
	"net/http"
	"strings"
)

// PathEscape percent-encodes every byte but RFC 3986's unreserved ones, as the sidecar does: an
// entity type or id becomes one path segment ("a/b" is "a%2Fb").
func PathEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0x0F])
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// errorBody is kshard's JSON error shape: {"error": {"code": ..., "message": ...}}.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func encodeError(code, message string) []byte {
	var e errorBody
	e.Error.Code = code
	e.Error.Message = message
	b, _ := json.Marshal(e)
	return b
}

// decodeError reads kshard's error shape; ok is false when body is not one.
func decodeError(body []byte) (code, message string, ok bool) {
	var e errorBody
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
		return "", "", false
	}
	return e.Error.Code, e.Error.Message, true
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(encodeError(code, message))
}
