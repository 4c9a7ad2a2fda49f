package kshard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Message is one entity message, as the sidecar delivers it.
type Message struct {
	Type string
	ID   string
	// Shard is the entity's shard (Kshard-Shard); Epoch the shard's assignment epoch
	// (Kshard-Epoch): write it with the entity's state and refuse older ones (fencing).
	Shard int
	Epoch uint64
	// Mode is "ask" or "tell": the answer of a tell is dropped by the sidecar.
	Mode string
	// Turn orders the entity's calls (Kshard-Turn, 0 when absent); already checked by the
	// Server. Incarnation is the sending sidecar process (Kshard-Incarnation).
	Turn        uint64
	Incarnation string
	// Header holds every request header: the sender's (Idempotency-Key included) and kshard's.
	Header http.Header
	Body   []byte
}

// Stop asks a handler to save an entity and forget it.
type Stop struct {
	Type        string
	ID          string
	Shard       int    // 0 on a reset
	Turn        uint64 // the entity's last message's turn
	Incarnation string
	// Reset is true when the stop is part of the reset callback (a new sidecar process).
	Reset bool
}

// Start starts an entity without a message (a remembered entity after its shard moved or its
// pod restarted) or a singleton on this pod. It is a turn like a message.
type Start struct {
	Type string // SingletonType for a singleton, whose name is ID
	ID   string
	// Shard, Epoch, Turn and Incarnation are as on a Message: write Epoch with the state.
	Shard       int
	Epoch       uint64
	Turn        uint64
	Incarnation string
	Header      http.Header
}

// Reply is a handler's answer; the sidecar returns it to the sender unchanged.
type Reply struct {
	Status int // 200 when 0
	Header http.Header
	Body   []byte
	// Passivate asks the sidecar to stop the entity after this turn (Kshard-Passivate: true):
	// the stop callback follows, and a remembered entity is forgotten first. On the answer to
	// a message or an entity's start; the sidecar ignores it for singletons.
	Passivate bool
}

// JSONReply encodes v as a JSON reply with the given status.
func JSONReply(status int, v any) (*Reply, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &Reply{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: b}, nil
}

// Error is an error with an HTTP status and a code: a handler that returns one answers
// {"error": {"code", "message"}} with that status. Any other error answers 500 Internal.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// Errorf makes an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Handler serves the entities of one type. The Server calls it for one entity at a time: never
// two calls for the same entity at once, calls for different entities concurrently.
type Handler interface {
	// OnMessage handles a message; the first one after a stop (or ever) starts the entity.
	OnMessage(ctx context.Context, m *Message) (*Reply, error)
	// OnStop saves the entity and forgets it. It may be called for an entity whose every
	// message failed: there may be nothing to save. An error keeps the entity active (the
	// sidecar asks again).
	OnStop(ctx context.Context, s *Stop) error
}

// Starter is a Handler that is told when the sidecar starts one of its entities without a
// message (POST /kshard/entities/{type}/{id}/start). OnStart loads the entity as a first
// message would; a nil Reply answers 200, one with Passivate asks for the entity's stop, an
// error (or a Reply whose status is not 2xx) leaves it not started and the sidecar asks again.
// It is not called for an entity already active: the start is then answered 200. A Handler
// that is no Starter has its entities marked active by a start, with no call.
type Starter interface {
	OnStart(ctx context.Context, s *Start) (*Reply, error)
}

// HandlerFuncs adapts functions to a Handler (and a Starter); a nil Stop or Start does nothing.
type HandlerFuncs struct {
	Message func(ctx context.Context, m *Message) (*Reply, error)
	Stop    func(ctx context.Context, s *Stop) error
	Start   func(ctx context.Context, s *Start) (*Reply, error)
}

// OnStart calls f.Start, if any.
func (f HandlerFuncs) OnStart(ctx context.Context, s *Start) (*Reply, error) {
	if f.Start == nil {
		return nil, nil
	}
	return f.Start(ctx, s)
}

// OnMessage calls f.Message.
func (f HandlerFuncs) OnMessage(ctx context.Context, m *Message) (*Reply, error) {
	return f.Message(ctx, m)
}

// OnStop calls f.Stop, if any.
func (f HandlerFuncs) OnStop(ctx context.Context, s *Stop) error {
	if f.Stop == nil {
		return nil
	}
	return f.Stop(ctx, s)
}
