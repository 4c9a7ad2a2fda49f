package kshard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync/atomic"
	"time"
)

// ClientOptions tunes a Client; the zero value is the defaults.
type ClientOptions struct {
	// BaseURL of the sidecar's app API. Default http://127.0.0.1:$KSHARD_API_PORT, or :7100.
	BaseURL string
	// Timeout of one call unless the call says otherwise (WithTimeout) or its context ends
	// sooner. Default 60 s: above the sidecar's sendTimeout plus its app timeout.
	Timeout time.Duration
	// MaxIdleConns kept open to the sidecar for reuse. Default 64.
	MaxIdleConns int
}

// Client sends messages to entities through the local sidecar. It is safe for concurrent use
// and reuses its connections: make one per process.
type Client struct {
	base    string
	timeout time.Duration
	hc      *http.Client
}

// NewClient makes a Client.
func NewClient(opts ClientOptions) *Client {
	if opts.BaseURL == "" {
		port := os.Getenv("KSHARD_API_PORT")
		if port == "" {
			port = "7100"
		}
		opts.BaseURL = "http://127.0.0.1:" + port
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.MaxIdleConns <= 0 {
		opts.MaxIdleConns = 64
	}
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        opts.MaxIdleConns,
		MaxIdleConnsPerHost: opts.MaxIdleConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &Client{base: opts.BaseURL, timeout: opts.Timeout, hc: &http.Client{Transport: transport}}
}

// Close closes the idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Response is the owner app's answer to an Ask: any status the app chose.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	Owner  string // the pod that ran the entity (Kshard-Owner)
}

// JSON decodes the body into v.
func (r *Response) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// AppError is the app's error when its answer is 4xx or 5xx in kshard's error shape, or nil.
func (r *Response) AppError() *Error {
	if r.Status < 400 {
		return nil
	}
	code, message, ok := decodeError(r.Body)
	if !ok {
		return &Error{Status: r.Status, Code: http.StatusText(r.Status), Message: string(r.Body)}
	}
	return &Error{Status: r.Status, Code: code, Message: message}
}

// CallOption changes one call.
type CallOption func(*call)

type call struct {
	timeout time.Duration
	header  http.Header
}

// WithTimeout bounds this call (instead of the Client's Timeout).
func WithTimeout(d time.Duration) CallOption { return func(c *call) { c.timeout = d } }

// WithHeader adds a header, passed to the app (except Authorization and Kshard-*).
func WithHeader(name, value string) CallOption {
	return func(c *call) { c.header.Add(name, value) }
}

// WithIdempotencyKey names the logical request, so that the app can recognise a retry.
func WithIdempotencyKey(key string) CallOption { return WithHeader(HeaderIdempotencyKey, key) }

// WithContentType sets the body's media type (default application/json).
func WithContentType(ct string) CallOption { return func(c *call) { c.header.Set("Content-Type", ct) } }

// Ask sends body to entity typ/id and returns its app's answer. The error is a *SidecarError
// when the sidecar answered with one of its own errors, a *TransportError when the sidecar
// itself failed; an app's error answer is a Response (see Response.AppError).
func (c *Client) Ask(ctx context.Context, typ, id string, body []byte, opts ...CallOption) (*Response, error) {
	return c.send(ctx, typ, id, "", body, opts)
}

// Tell sends body to entity typ/id and returns once its owner has queued it (202); the app's
// answer is dropped. The errors are Ask's.
func (c *Client) Tell(ctx context.Context, typ, id string, body []byte, opts ...CallOption) error {
	r, err := c.send(ctx, typ, id, "?mode=tell", body, opts)
	if err != nil {
		return err
	}
	if r.Status != http.StatusAccepted {
		return fmt.Errorf("kshard: tell answered %d, not 202: %s", r.Status, truncate(r.Body))
	}
	return nil
}

func (c *Client) send(ctx context.Context, typ, id, query string, body []byte,
	opts []CallOption) (*Response, error) {
	return c.post(ctx, "/v1/entities/"+PathEscape(typ)+"/"+PathEscape(id)+query, body, opts)
}

// post sends body to the app API's `target` (path and query).
func (c *Client) post(ctx context.Context, target string, body []byte, opts []CallOption) (*Response, error) {
	cl := call{timeout: c.timeout, header: http.Header{"Content-Type": {"application/json"}}}
	for _, o := range opts {
		o(&cl)
	}
	ctx, cancel := context.WithTimeout(ctx, cl.timeout)
	defer cancel()
	var sent atomic.Bool // set on the transport's goroutine
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { sent.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = cl.header
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, &TransportError{Sent: sent.Load(), Err: cause(ctx, err)}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, &TransportError{Sent: true, Err: cause(ctx, err)}
	}
	if se := sidecarError(res, data); se != nil {
		return nil, se
	}
	return &Response{Status: res.StatusCode, Header: res.Header, Body: data,
		Owner: res.Header.Get(HeaderOwner)}, nil
}

// sidecarError is the sidecar's own error in res, or nil for an app's answer: one with
// Kshard-Error, or (the HTTP layer's 413 and 400 carry no Kshard-Error) an error-shaped 4xx
// without Kshard-Owner, which every app answer has.
func sidecarError(res *http.Response, body []byte) *SidecarError {
	code := res.Header.Get(HeaderError)
	if code == "" && (res.StatusCode < 400 || res.Header.Get(HeaderOwner) != "") {
		return nil
	}
	c, message, ok := decodeError(body)
	if code == "" {
		if !ok {
			return nil
		}
		code = c
	}
	if !ok {
		message = truncate(body)
	}
	return &SidecarError{Status: res.StatusCode, Code: code, Message: message}
}

func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

func truncate(b []byte) string {
	if len(b) > 256 {
		return string(b[:256]) + "..."
	}
	return string(b)
}
