// Package httpcall sends one HTTP request and returns the answer as a status and a text, for
// the suites' checks: a status of 0 means no answer, and the text is then the error's. One copy
// for the end-to-end suites and the benchmarks (e2e/support/README.md).
package httpcall

import (
	"io"
	"net/http"
	"strings"
	"time"
)

// Get sends a GET and returns the answer's status and body, or 0 and the error's text when no
// answer came within timeout.
func Get(timeout time.Duration, url string) (int, string) {
	client := &http.Client{Timeout: timeout}
	return answer(client.Get(url))
}

// Post sends body as JSON (Content-Type: application/json), with token as the bearer token when
// it is not empty, and returns like Get.
func Post(timeout time.Duration, url, body, token string) (int, string) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: timeout}
	return answer(client.Do(req))
}

func answer(resp *http.Response, err error) (int, string) {
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
