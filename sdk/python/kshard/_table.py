"""What the entity server remembers of its entities (the turn bounds, who reset it)."""

import collections
import threading
import time


class RWLock:
    """Shared by every message and stop for its whole call, exclusive for a reset, which so waits
    for the calls in flight. A waiting writer holds new readers back."""

    def __init__(self):
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    def acquire_read(self):
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1

    def release_read(self):
        with self._cond:
            self._readers -= 1
            if self._readers == 0:
                self._cond.notify_all()

    def acquire_write(self):
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True

    def release_write(self):
        with self._cond:
            self._writer = False
            self._cond.notify_all()


class Entity:
    """One entity's record; its fields are guarded by Table.mu, `calls` holds one call at a time."""

    __slots__ = ("calls", "refs", "active", "started", "bound", "stopped_at")

    def __init__(self):
        self.calls = threading.Lock()
        self.refs = 0
        self.active = False  # a message or a start reached the handler since the last stop
        self.started = False  # a start succeeded since the last stop (what runs a singleton)
        self.bound = 0  # the last turn handled or stopped: a message must be above it
        self.stopped_at = 0.0


def is_singleton(key):
    """Singletons' keys are (SINGLETON_TYPE, name, True), apart from any entity's (type, id)."""
    return len(key) == 3


class Table:
    def __init__(self, keep_seconds, clock=time.monotonic):
        self.gate = RWLock()
        self.mu = threading.Lock()
        self.entities = {}
        self.reset_by = ""  # the incarnation of the last reset's sidecar process
        self.stops = collections.deque()  # (time, key) of stop bounds, oldest first
        self.keep = keep_seconds
        self.clock = clock

    def stale_sender(self, sender):
        """The incarnation of the last reset when a callback of `sender` is refused, else None."""
        with self.mu:
            if not self.reset_by or not sender or sender == self.reset_by:
                return None
            return self.reset_by

    def acquire(self, key):
        with self.mu:
            e = self.entities.get(key)
            if e is None:
                e = self.entities[key] = Entity()
            e.refs += 1
            return e

    def release(self, key, e):
        with self.mu:
            e.refs -= 1
            if e.refs == 0 and not e.active and e.bound == 0:
                self.entities.pop(key, None)

    def admit(self, e, turn):
        """(bound, late): a message not late raises the bound to its turn and activates."""
        with self.mu:
            if turn and turn <= e.bound:
                return e.bound, True
            e.bound = max(e.bound, turn)
            e.active = True
            return e.bound, False

    def admit_start(self, key, e, turn):
        """(bound, late, need): a start's turn checked and taken as admit does, but nothing
        marked active until start_done. `need`: a handler must run it (an entity not active, a
        singleton not started: a message may have reached it first)."""
        with self.mu:
            if turn and turn <= e.bound:
                return e.bound, True, False
            e.bound = max(e.bound, turn)
            return e.bound, False, not (e.started if is_singleton(key) else e.active)

    def start_done(self, key, e, ok):
        """A started entity is active; one whose start failed stays as it was, its bound kept
        (and forgotten in time) as a stop's when it is not active."""
        with self.mu:
            if ok:
                e.active = e.started = True
            elif not e.active:
                self._stopped(key, e, 0)

    def state(self, e):
        with self.mu:
            return e.active, e.bound

    def stopped(self, key, e, turn):
        """Records the stop as of `turn` (the bound is the newer of it and the last handled)."""
        with self.mu:
            self._stopped(key, e, turn)

    def _stopped(self, key, e, turn):
        now = self.clock()
        self._prune(now)
        e.active = e.started = False
        e.bound = max(e.bound, turn)
        if e.bound == 0:
            if e.refs == 0:
                self.entities.pop(key, None)
            return
        e.stopped_at = now
        self.stops.append((now, key))

    def _prune(self, now):
        while self.stops and now - self.stops[0][0] > self.keep:
            at, key = self.stops.popleft()
            e = self.entities.get(key)
            if e is not None and not e.active and e.refs == 0 and e.stopped_at == at:
                del self.entities[key]

    def begin_reset(self, sender):
        """Under the exclusive gate: a new process's turns start over, so every bound goes.
        Returns the active entities' keys, sorted."""
        with self.mu:
            if sender != self.reset_by:
                self.stops.clear()
                for key, e in list(self.entities.items()):
                    e.bound = 0
                    if not e.active and e.refs == 0:
                        del self.entities[key]
            self.reset_by = sender
            return sorted(k for k, e in self.entities.items() if e.active)

    def get(self, key):
        with self.mu:
            return self.entities.get(key)

    def active_count(self):
        with self.mu:
            return sum(1 for e in self.entities.values() if e.active)
