"""The counter example (examples/counter) written with kshard's Python SDK: entity type
"counter" on the app port for the sidecar, and a public API (POST /counters/{id}/increment,
GET /counters/{id}) that reaches any counter through the sidecar. A counter is loaded on its
first message, which claims the shard's epoch in the store, and saved on every increment and on
stop with that epoch as fencing token. Activations and stops are JSON lines on stdout and in the
shared event log, in the C++ counter's shape."""

import json
import os
import sys
import threading
import time

import kshard
from store import Fenced, Store

BAD_BODY = 'body must be {"op":"increment"|"get","by":n}'


def store_failure(e):
    if isinstance(e, Fenced):
        return kshard.Error(409, "Fenced", str(e))
    return kshard.Error(500, "StoreUnavailable", str(e))


def parse_request(body):
    """(op, by) of a message body; raises kshard.Error 400 for a bad one."""
    if not body:
        return "get", 1
    try:
        req = json.loads(body)
    except ValueError:
        raise kshard.Error(400, "BadRequest", BAD_BODY) from None
    if (not isinstance(req, dict) or not isinstance(req.get("op", ""), str)
            or not _is_int(req.get("by", 1))):
        raise kshard.Error(400, "BadRequest", BAD_BODY)
    op, by = req.get("op", "get"), req.get("by", 1)
    if op not in ("increment", "get"):
        raise kshard.Error(400, "BadRequest", "op must be increment or get")
    return op, by


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


class Counters:
    """The handler of entity type "counter"; one call at a time per counter is the server's."""

    def __init__(self, store, pod, event_log):
        self.store, self.pod = store, pod
        self.events = open(event_log, "ab", buffering=0) if event_log else None
        self.mu = threading.Lock()
        self.active = {}  # id -> [value, epoch]

    def on_message(self, msg):
        op, by = parse_request(msg.body)
        with self.mu:
            a = self.active.get(msg.id)
        # A copy from an older epoch may be stale: the store has the newest value.
        if a is None or a[1] < msg.epoch:
            try:
                value = self.claim(msg.id, msg.epoch)
            except (Fenced, OSError, ValueError, KeyError) as e:
                raise store_failure(e) from None
            activated = a is None
            a = [value, msg.epoch]
            with self.mu:
                self.active[msg.id] = a
            if activated:
                self.event("activate", msg.id, str(msg.shard), a)
        if op == "increment":
            try:
                self.store.save(msg.id, a[0] + by, a[1])
            except (Fenced, OSError) as e:
                raise store_failure(e) from None
            a[0] += by
        return kshard.json_reply({"epoch": a[1], "id": msg.id, "pod": self.pod, "value": a[0]})

    def claim(self, ident, epoch):
        """Loads a counter and claims `epoch` for it in the store before anything else."""
        value, stored = self.store.load(ident)
        if stored > epoch:
            raise Fenced(f"a newer owner (epoch {stored}) has this counter")
        if stored < epoch:
            self.store.save(ident, value, epoch)
        return value

    def on_stop(self, stop):
        with self.mu:
            a = self.active.get(stop.id)
        if a is None:
            return
        try:
            self.store.save(stop.id, a[0], a[1])
        except Fenced:
            pass  # a newer owner already wrote: this copy is stale and may simply go
        except OSError as e:
            raise kshard.Error(500, "StoreUnavailable", str(e)) from None
        self.event("stop", stop.id, "" if stop.reset else str(stop.shard), a)
        with self.mu:
            del self.active[stop.id]

    def event(self, name, ident, shard, a):
        line = json.dumps({"entity": ident, "epoch": a[1], "event": name, "pod": self.pod,
                           "shard": shard, "ts_us": time.time_ns() // 1000, "value": a[0]},
                          separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        if self.events is not None:  # one write with O_APPEND: lines interleave whole
            try:
                self.events.write(line)
            except OSError as e:
                print(f"event log write failed: {e}", file=sys.stderr)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
