package kshard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// SingletonType is the entity type of singletons (ShardMap spec.singletons): a singleton's
// Message, Start and Stop have it as Type and its name as ID.
const SingletonType = "kshard.io/singleton"

// SingletonHandler runs one singleton of the ShardMap (spec.singletons) while this pod owns its
// shard. Its calls are turns, one at a time, as an entity's.
type SingletonHandler interface {
	// OnStart starts the singleton here (POST /kshard/singletons/{name}/start). An error leaves
	// it not started: the sidecar asks again. Not called again while it runs.
	OnStart(ctx context.Context, s *Start) error
	// OnMessage handles a message sent to the singleton (POST /v1/singletons/{name}).
	OnMessage(ctx context.Context, m *Message) (*Reply, error)
	// OnStop stops it here: its shard leaves the pod, or the spec no longer lists it. An error
	// keeps it running (the sidecar asks again).
	OnStop(ctx context.Context, s *Stop) error
}

// SingletonFuncs adapts functions to a SingletonHandler; a nil Start or Stop does nothing, a
// nil Message answers 404 NotFound.
type SingletonFuncs struct {
	Start   func(ctx context.Context, s *Start) error
	Message func(ctx context.Context, m *Message) (*Reply, error)
	Stop    func(ctx context.Context, s *Stop) error
}

// OnStart calls f.Start, if any.
func (f SingletonFuncs) OnStart(ctx context.Context, s *Start) error {
	if f.Start == nil {
		return nil
	}
	return f.Start(ctx, s)
}

// OnMessage calls f.Message, if any.
func (f SingletonFuncs) OnMessage(ctx context.Context, m *Message) (*Reply, error) {
	if f.Message == nil {
		return nil, Errorf(http.StatusNotFound, "NotFound", "singleton %s takes no messages", m.ID)
	}
	return f.Message(ctx, m)
}

// OnStop calls f.Stop, if any.
func (f SingletonFuncs) OnStop(ctx context.Context, s *Stop) error {
	if f.Stop == nil {
		return nil
	}
	return f.Stop(ctx, s)
}

// HandleSingleton registers the handler of the singleton `name`. The reset callback stops it
// as it stops entities.
func (s *Server) HandleSingleton(name string, h SingletonHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.singles[name] = h
}

type messageHandler interface {
	OnMessage(ctx context.Context, m *Message) (*Reply, error)
}

type stopHandler interface {
	OnStop(ctx context.Context, s *Stop) error
}

// startFunc runs a start; nil when nothing handles the entity.
type startFunc func(ctx context.Context, s *Start) (*Reply, error)

// entityCalls are what a Handler and a SingletonHandler share.
type entityCalls interface {
	messageHandler
	stopHandler
}

// callsOf is the handler of an entity or a singleton, or nil.
func (s *Server) callsOf(k entityKey) entityCalls {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if k.singleton {
		if h := s.singles[k.id]; h != nil {
			return h
		}
	} else if h := s.handlers[k.typ]; h != nil {
		return h
	}
	return nil
}

func (s *Server) startFunc(k entityKey) startFunc {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if k.singleton {
		if h := s.singles[k.id]; h != nil {
			// Kshard-Passivate is for entities: a singleton runs where the spec says.
			return func(ctx context.Context, st *Start) (*Reply, error) { return nil, h.OnStart(ctx, st) }
		}
		return nil
	}
	h := s.handlers[k.typ]
	if h == nil {
		return nil
	}
	if st, ok := h.(Starter); ok {
		return st.OnStart
	}
	return func(context.Context, *Start) (*Reply, error) { return nil, nil }
}

func writeUnknown(w http.ResponseWriter, k entityKey) {
	if k.singleton {
		writeError(w, http.StatusNotFound, "UnknownSingleton", "no handler for singleton "+k.id)
	} else {
		writeError(w, http.StatusNotFound, "UnknownEntityType", "no handler for entity type "+k.typ)
	}
}

// serveStart starts an entity or a singleton without a message: a turn, checked and run one at
// a time as a message's, idempotent (200 with no call for one that runs already).
func (s *Server) serveStart(w http.ResponseWriter, r *http.Request, k entityKey) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, s.maxBody))
	start := s.startFunc(k)
	if start == nil {
		writeUnknown(w, k)
		return
	}
	shard, _ := strconv.Atoi(r.Header.Get(HeaderShard))
	st := &Start{Type: k.typ, ID: k.id, Shard: shard, Epoch: headerUint(r.Header, HeaderEpoch),
		Turn: headerUint(r.Header, HeaderTurn), Incarnation: r.Header.Get(HeaderIncarnation),
		Header: r.Header}
	s.inTurn(w, k, st.Incarnation, func(e *entity) {
		bound, late, need := s.t.admitStart(k, e, st.Turn)
		if late {
			writeError(w, http.StatusConflict, "LateMessage", fmt.Sprintf(
				"start turn %d of %s %s came after turn or stop %d was handled", st.Turn, k.typ, k.id, bound))
			return
		}
		if !need {
			writeJSON(w, http.StatusOK, []byte("{}"))
			return
		}
		reply, err := callStart(r.Context(), start, st)
		s.t.startDone(k, e, err == nil && (reply == nil || reply.Status == 0 ||
			(reply.Status >= 200 && reply.Status < 300)))
		if err == nil && reply == nil {
			writeJSON(w, http.StatusOK, []byte("{}"))
			return
		}
		writeReply(w, reply, err)
	})
}

func callStart(ctx context.Context, f startFunc, s *Start) (reply *Reply, err error) {
	defer func() {
		if p := recover(); p != nil {
			reply, err = nil, fmt.Errorf("start handler panicked: %v", p)
		}
	}()
	return f(ctx, s)
}
