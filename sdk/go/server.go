package kshard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names of the app contract (sdk/README.md).
const (
	HeaderShard          = "Kshard-Shard"
	HeaderEpoch          = "Kshard-Epoch"
	HeaderMode           = "Kshard-Mode"
	HeaderTurn           = "Kshard-Turn"
	HeaderIncarnation    = "Kshard-Incarnation"
	HeaderOwner          = "Kshard-Owner"
	HeaderError          = "Kshard-Error"
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderPassivate on an answer asks the sidecar to stop the entity after the turn (set it
	// with Reply.Passivate).
	HeaderPassivate = "Kshard-Passivate"
)

// DefaultMaxBodyBytes is the sidecar's default --max-body-bytes: the largest message it sends.
const DefaultMaxBodyBytes = 4 << 20

// ServerOptions tunes a Server; the zero value is the defaults.
type ServerOptions struct {
	// MaxBodyBytes is the largest message body taken (413 PayloadTooLarge above); at least the
	// sidecar's --max-body-bytes. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// StopBoundsKeptFor is how long the turn of an entity's stop is remembered to refuse late
	// messages. Default 10 minutes.
	StopBoundsKeptFor time.Duration
}

// Server serves the sidecar's callbacks (an http.Handler for the app port).
type Server struct {
	maxBody  int64
	mu       sync.RWMutex
	handlers map[string]Handler
	singles  map[string]SingletonHandler
	onReset  func(ctx context.Context) error
	topics   TopicHandler
	t        *table
}

// NewServer makes a Server with no entity type yet.
func NewServer(opts ServerOptions) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.StopBoundsKeptFor <= 0 {
		opts.StopBoundsKeptFor = 10 * time.Minute
	}
	return &Server{maxBody: opts.MaxBodyBytes, handlers: map[string]Handler{},
		singles: map[string]SingletonHandler{}, t: newTable(opts.StopBoundsKeptFor)}
}

// Handle registers the handler of an entity type.
func (s *Server) Handle(entityType string, h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[entityType] = h
}

// OnReset registers an app-wide function the reset callback calls after it has stopped every
// active entity (through their handlers' OnStop), for state held outside entities.
func (s *Server) OnReset(f func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onReset = f
}

// ActiveEntities is the number of entities whose handler got a message since their last stop.
func (s *Server) ActiveEntities() int { return s.t.activeCount() }

// ServeHTTP routes /kshard/entities/{type}/{id}[/stop|/start],
// /kshard/singletons/{name}[/stop|/start], /kshard/reset and /kshard/topics/{topic}.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	c, ok := routeOf(path)
	if !ok {
		writeError(w, http.StatusNotFound, "NotFound", "no such callback: "+path)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "callbacks are POST")
		return
	}
	switch c.kind {
	case kindReset:
		s.serveReset(w, r)
		return
	case kindTopic:
		s.serveTopic(w, r, c.segments[0])
		return
	}
	k, err := c.key()
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidArgument", "bad percent-escape: "+err.Error())
		return
	}
	if k.typ == "" || k.id == "" {
		writeError(w, http.StatusBadRequest, "BadRequest", "entity type and id must not be empty")
		return
	}
	switch c.kind {
	case kindStop:
		s.serveStop(w, r, k)
	case kindStart:
		s.serveStart(w, r, k)
	default:
		s.serveMessage(w, r, k)
	}
}

func headerUint(h http.Header, name string) uint64 {
	n, _ := strconv.ParseUint(h.Get(name), 10, 64)
	return n
}

// readBody reads a callback's body, at most maxBody bytes; when it cannot, it answers and
// returns false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "PayloadTooLarge",
				fmt.Sprintf("the body is over %d bytes", s.maxBody))
		} else {
			writeError(w, http.StatusBadRequest, "BadRequest", "cannot read the body: "+err.Error())
		}
		return nil, false
	}
	return body, true
}

func (s *Server) readMessage(w http.ResponseWriter, r *http.Request, k entityKey) (*Message, bool) {
	body, ok := s.readBody(w, r)
	if !ok {
		return nil, false
	}
	shard, _ := strconv.Atoi(r.Header.Get(HeaderShard))
	mode := r.Header.Get(HeaderMode)
	if mode == "" {
		mode = "ask"
	}
	return &Message{Type: k.typ, ID: k.id, Shard: shard, Epoch: headerUint(r.Header, HeaderEpoch),
		Mode: mode, Turn: headerUint(r.Header, HeaderTurn),
		Incarnation: r.Header.Get(HeaderIncarnation), Header: r.Header, Body: body}, true
}

// refuseStale answers 409 StaleSidecar to a callback of another process than the last reset's.
func (s *Server) refuseStale(w http.ResponseWriter, from string) bool {
	resetBy, stale := s.t.staleSender(from)
	if stale {
		writeError(w, http.StatusConflict, "StaleSidecar", fmt.Sprintf(
			"sent by sidecar process %s, not %s, the one that reset this app", from, resetBy))
	}
	return stale
}

func (s *Server) serveMessage(w http.ResponseWriter, r *http.Request, k entityKey) {
	h := s.callsOf(k)
	if h == nil {
		writeUnknown(w, k)
		return
	}
	m, ok := s.readMessage(w, r, k)
	if !ok {
		return
	}
	s.inTurn(w, k, m.Incarnation, func(e *entity) {
		if bound, late := s.t.admit(e, m.Turn); late {
			writeError(w, http.StatusConflict, "LateMessage", fmt.Sprintf(
				"turn %d of %s %s came after turn or stop %d was handled", m.Turn, k.typ, k.id, bound))
			return
		}
		reply, err := callMessage(r.Context(), h, m)
		writeReply(w, reply, err)
	})
}

func (s *Server) serveStop(w http.ResponseWriter, r *http.Request, k entityKey) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, s.maxBody))
	from := r.Header.Get(HeaderIncarnation)
	s.inTurn(w, k, from, func(e *entity) {
		turn := headerUint(r.Header, HeaderTurn)
		if active, bound := s.t.isActive(e); active {
			if h := s.callsOf(k); h != nil {
				shard, _ := strconv.Atoi(r.Header.Get(HeaderShard))
				stop := &Stop{Type: k.typ, ID: k.id, Shard: shard, Turn: max(turn, bound), Incarnation: from}
				if err := callStop(r.Context(), h, stop); err != nil {
					writeReply(w, nil, err) // it stays active: the sidecar asks again
					return
				}
			}
		}
		s.t.stopped(k, e, turn)
		writeJSON(w, http.StatusOK, []byte("{}"))
	})
}

// inTurn runs fn as entity k's call: one at a time for the entity, the shared gate held (a
// reset waits for it), a stale sidecar process's callback refused.
func (s *Server) inTurn(w http.ResponseWriter, k entityKey, from string, fn func(e *entity)) {
	s.t.gate.RLock()
	defer s.t.gate.RUnlock()
	if s.refuseStale(w, from) {
		return
	}
	e := s.t.acquire(k)
	defer s.t.release(k, e)
	e.calls.Lock()
	defer e.calls.Unlock()
	fn(e)
}

// serveReset stops every active entity, after the calls in flight (the exclusive gate), and
// from then on refuses callbacks of any other sidecar process than this one.
func (s *Server) serveReset(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, s.maxBody))
	from := r.Header.Get(HeaderIncarnation)
	s.t.gate.Lock()
	defer s.t.gate.Unlock()
	for _, k := range s.t.beginReset(from) {
		e := s.t.entityOf(k)
		_, bound := s.t.isActive(e)
		if h := s.callsOf(k); h != nil {
			stop := &Stop{Type: k.typ, ID: k.id, Turn: bound, Incarnation: from, Reset: true}
			if err := callStop(r.Context(), h, stop); err != nil {
				writeReply(w, nil, err)
				return
			}
		}
		s.t.stopped(k, e, bound)
	}
	s.mu.RLock()
	onReset := s.onReset
	s.mu.RUnlock()
	if onReset != nil {
		if err := onReset(r.Context()); err != nil {
			writeReply(w, nil, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, []byte("{}"))
}

// callMessage runs the handler; a panic is an error (500 Internal), not a lost connection.
func callMessage(ctx context.Context, h messageHandler, m *Message) (reply *Reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			reply, err = nil, fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h.OnMessage(ctx, m)
}

func callStop(ctx context.Context, h stopHandler, s *Stop) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("stop handler panicked: %v", p)
		}
	}()
	return h.OnStop(ctx, s)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeReply(w http.ResponseWriter, reply *Reply, err error) {
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			writeError(w, e.Status, e.Code, e.Message)
		} else {
			writeError(w, http.StatusInternalServerError, "Internal", err.Error())
		}
		return
	}
	if reply == nil {
		reply = &Reply{}
	}
	for name, values := range reply.Header {
		// Kshard-* headers on an answer are the sidecar's to set: a Kshard-Error copied from a
		// nested call would make the caller read a delivered message as not delivered.
		if strings.HasPrefix(strings.ToLower(name), "kshard-") {
			continue
		}
		w.Header()[http.CanonicalHeaderKey(name)] = values
	}
	if reply.Passivate {
		w.Header().Set(HeaderPassivate, "true")
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(reply.Body)
}
