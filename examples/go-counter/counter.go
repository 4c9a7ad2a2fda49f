package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
	"time"

	kshard "kshard.io/sdk/go"
)

// counters is the handler of entity type "counter" (examples/counter/counter_app.h): a counter
// is loaded on its first message, which claims the shard's epoch in the store, saved on every
// increment and on stop with that epoch as fencing token. Every activation and stop is a JSON
// line on stdout and in the shared event log. One call at a time per counter: the Server's.
type counters struct {
	store  store
	pod    string
	events *os.File // nil: stdout only
	mu     sync.Mutex
	active map[string]*state
}

type request struct {
	Op *string `json:"op"`
	By *int64  `json:"by"`
}

func storeFailure(err error) error {
	if errors.Is(err, errFenced) {
		return kshard.Errorf(409, "Fenced", "%v", err)
	}
	return kshard.Errorf(500, "StoreUnavailable", "%v", err)
}

func parseRequest(body []byte) (op string, by int64, err error) {
	op, by = "get", 1
	if len(body) == 0 {
		return op, by, nil
	}
	var r request
	if json.Unmarshal(body, &r) != nil || (r.Op == nil && len(body) > 0 && body[0] != '{') {
		return "", 0, kshard.Errorf(400, "BadRequest", `body must be {"op":"increment"|"get","by":n}`)
	}
	if r.Op != nil {
		op = *r.Op
	}
	if r.By != nil {
		by = *r.By
	}
	if op != "increment" && op != "get" {
		return "", 0, kshard.Errorf(400, "BadRequest", "op must be increment or get")
	}
	return op, by, nil
}

func (c *counters) OnMessage(ctx context.Context, m *kshard.Message) (*kshard.Reply, error) {
	op, by, err := parseRequest(m.Body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	a := c.active[m.ID]
	c.mu.Unlock()
	// A copy held from an older epoch may be stale (the shard may have been elsewhere
	// meanwhile): the store has the newest value, as every increment is saved.
	if a == nil || a.Epoch < m.Epoch {
		value, err := c.claim(m.ID, m.Epoch)
		if err != nil {
			return nil, storeFailure(err)
		}
		activated := a == nil
		if activated {
			a = &state{}
		}
		*a = state{Epoch: m.Epoch, Value: value}
		c.mu.Lock()
		c.active[m.ID] = a
		c.mu.Unlock()
		if activated {
			c.event("activate", m.ID, strconv.Itoa(m.Shard), a)
		}
	}
	if op == "increment" {
		next := state{Epoch: a.Epoch, Value: a.Value + by}
		if err := c.store.save(m.ID, next); err != nil {
			return nil, storeFailure(err)
		}
		a.Value = next.Value
	}
	return kshard.JSONReply(200, map[string]any{"id": m.ID, "value": a.Value, "pod": c.pod, "epoch": a.Epoch})
}

// claim loads a counter and claims `epoch` for it in the store before anything else, so that
// a previous owner that still writes is refused from now on.
func (c *counters) claim(id string, epoch uint64) (int64, error) {
	st, err := c.store.load(id)
	if err != nil {
		return 0, err
	}
	if st.Epoch > epoch {
		return 0, fmt.Errorf("%w: a newer owner (epoch %d) has this counter", errFenced, st.Epoch)
	}
	if st.Epoch < epoch {
		if err := c.store.save(id, state{Epoch: epoch, Value: st.Value}); err != nil {
			return 0, err
		}
	}
	return st.Value, nil
}

func (c *counters) OnStop(ctx context.Context, s *kshard.Stop) error {
	c.mu.Lock()
	a := c.active[s.ID]
	c.mu.Unlock()
	if a == nil {
		return nil
	}
	// Fenced means a newer owner already wrote: this copy is stale and may simply go.
	if err := c.store.save(s.ID, *a); err != nil && !errors.Is(err, errFenced) {
		return kshard.Errorf(500, "StoreUnavailable", "%v", err)
	}
	shard := ""
	if !s.Reset {
		shard = strconv.Itoa(s.Shard)
	}
	c.event("stop", s.ID, shard, a)
	c.mu.Lock()
	delete(c.active, s.ID)
	c.mu.Unlock()
	return nil
}

func (c *counters) activeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.active)
}

// event is one activation or stop, in the C++ counter's JSON shape (keys sorted).
type event struct {
	Entity string `json:"entity"`
	Epoch  uint64 `json:"epoch"`
	Event  string `json:"event"`
	Pod    string `json:"pod"`
	Shard  string `json:"shard"`
	TsUs   int64  `json:"ts_us"`
	Value  int64  `json:"value"`
}

func (c *counters) event(name, id, shard string, a *state) {
	line, _ := json.Marshal(event{id, a.Epoch, name, c.pod, shard, time.Now().UnixMicro(), a.Value})
	line = append(line, '\n')
	// One write with O_APPEND: lines from all pods interleave whole.
	if c.events != nil {
		if _, err := c.events.Write(line); err != nil {
			log.Printf("event log write failed: %v", err)
		}
	}
	_, _ = os.Stdout.Write(line)
}
