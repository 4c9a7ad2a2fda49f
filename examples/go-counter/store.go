package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"

	kshard "kshard.io/sdk/go"
)

// errFenced: the stored epoch is newer than the one written (a newer owner has the counter).
var errFenced = errors.New("fenced")

// state is a counter's saved state, in the C++ counter's file format ({"epoch":E,"value":V}),
// so that the three counters can share one state directory.
type state struct {
	Epoch uint64 `json:"epoch"`
	Value int64  `json:"value"`
}

// store keeps one JSON file per counter in a directory shared by all pods; a save with an epoch
// older than the stored one is refused (examples/counter/counter_store.h).
type store struct{ dir string }

func (s store) path(id string) string { return s.dir + "/" + kshard.PathEscape(id) + ".json" }

// load is the saved state, or a zero state when there is none.
func (s store) load(id string) (state, error) {
	b, err := os.ReadFile(s.path(id))
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(b) == 0) {
		return state{}, nil
	}
	if err != nil {
		return state{}, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return state{}, fmt.Errorf("corrupt state file %s: %w", s.path(id), err)
	}
	return st, nil
}

// save writes atomically (a temporary file and a rename, under an exclusive flock of the
// counter's lock file); errFenced when the stored epoch is newer than st.Epoch.
func (s store) save(id string, st state) error {
	path := s.path(id)
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close() // closing releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	stored, err := s.load(id)
	if err != nil {
		return err
	}
	if stored.Epoch > st.Epoch {
		return fmt.Errorf("%w: stored epoch %d is newer than %d", errFenced, stored.Epoch, st.Epoch)
	}
	body, _ := json.Marshal(st)
	if err := os.WriteFile(path+".tmp", append(body, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
