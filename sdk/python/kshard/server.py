"""The entity server: serves the sidecar's callbacks with the app contract's semantics
(sdk/README.md) on http.server."""

import functools
import json
import logging
import re
import threading
import types
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ._table import Table, is_singleton
from .errors import Error, error_body
from .topics import HEADER_PUBLISHER, HEADER_TOPIC, Publication

log = logging.getLogger("kshard")

HEADER_SHARD = "Kshard-Shard"
HEADER_EPOCH = "Kshard-Epoch"
HEADER_MODE = "Kshard-Mode"
HEADER_TURN = "Kshard-Turn"
HEADER_INCARNATION = "Kshard-Incarnation"
HEADER_OWNER = "Kshard-Owner"
HEADER_ERROR = "Kshard-Error"
HEADER_IDEMPOTENCY_KEY = "Idempotency-Key"
#: on an answer: stop the entity after this turn (set it with Reply.passivate)
HEADER_PASSIVATE = "Kshard-Passivate"

#: the entity type of singletons (ShardMap spec.singletons): a singleton's Start, Message and
#: Stop have it as `type` and its name as `id`
SINGLETON_TYPE = "kshard.io/singleton"

#: the sidecar's default --max-body-bytes: the largest message it sends
DEFAULT_MAX_BODY_BYTES = 4 << 20


@dataclass
class Message:
    """One entity message as the sidecar delivers it. `epoch` is the shard's assignment epoch
    (write it with the entity's state, refuse older ones); `turn` is already checked."""
    type: str
    id: str
    shard: int
    epoch: int
    mode: str  # "ask" or "tell" (the sidecar drops a tell's answer)
    turn: int
    incarnation: str
    headers: dict  # every request header, names in lower case
    body: bytes


@dataclass
class Stop:
    """Save the entity and forget it. `reset` is True when the stop is part of a reset."""
    type: str
    id: str
    shard: int
    turn: int
    incarnation: str
    reset: bool = False


@dataclass
class Start:
    """Start the entity without a message (a remembered entity after its shard moved or its pod
    restarted), or the singleton, on this pod: a turn, as a message's. Write `epoch` with the
    state."""
    type: str
    id: str
    shard: int
    epoch: int
    turn: int
    incarnation: str
    headers: dict


@dataclass
class Reply:
    """A handler's answer. `passivate` asks the sidecar to stop the entity after this turn
    (Kshard-Passivate: true; a remembered entity is forgotten first); ignored for singletons."""
    status: int = 200
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    passivate: bool = False


def json_reply(obj, status=200, passivate=False):
    return Reply(status, {"Content-Type": "application/json"}, json.dumps(obj).encode(), passivate)


def error_reply(status, code, message, **headers):
    return Reply(status, {"Content-Type": "application/json", **headers}, error_body(code, message))


def _uint(headers, name):
    try:
        return max(0, int(headers.get(name.lower(), "0") or "0"))
    except ValueError:
        return 0


_SEGMENT = re.compile(r"(?:[^%]|%[0-9A-Fa-f]{2})*")


def _unquote(segment):
    """Percent-decodes one path segment as UTF-8; None when the escapes or UTF-8 are bad."""
    if not _SEGMENT.fullmatch(segment):
        return None  # an escape that is not one ("%zz")
    try:
        return urllib.parse.unquote_to_bytes(segment).decode("utf-8")
    except UnicodeDecodeError:
        return None


class EntityServer:
    """One handler per entity type; one call at a time per entity; late turns (409 LateMessage)
    and callbacks of a sidecar process other than the last reset's (409 StaleSidecar) refused;
    reset stops every active entity after the calls in flight."""

    def __init__(self, max_body_bytes=DEFAULT_MAX_BODY_BYTES, stop_bounds_kept_for=600.0):
        self.max_body_bytes = max_body_bytes
        self._handlers = {}
        self._singletons = {}
        self._on_reset = None
        self._on_topic = None
        self._table = Table(stop_bounds_kept_for)

    def handle(self, entity_type, handler=None, *, on_message=None, on_stop=None, on_start=None):
        """Registers the handler of a type: an object with on_message(Message) -> Reply,
        on_stop(Stop) and, optionally, on_start(Start) -> Reply or None; or those functions
        (on_stop and on_start may be omitted)."""
        if handler is None:
            handler = types.SimpleNamespace(
                on_message=on_message, on_stop=on_stop or (lambda stop: None), on_start=on_start)
        self._handlers[entity_type] = handler

    def handle_singleton(self, name, handler=None, *, on_start=None, on_message=None,
                         on_stop=None):
        """Registers the singleton `name` (spec.singletons): an object with on_start(Start),
        on_message(Message) -> Reply and on_stop(Stop), or those functions. Any may be missing:
        a start or a stop then does nothing, a message is answered 404."""
        if handler is not None:
            on_start = getattr(handler, "on_start", None)
            on_message = getattr(handler, "on_message", None)
            on_stop = getattr(handler, "on_stop", None)
        self._singletons[name] = types.SimpleNamespace(
            on_start=on_start or (lambda start: None),
            on_message=on_message or functools.partial(_no_messages, name),
            on_stop=on_stop or (lambda stop: None))

    def on_reset(self, fn):
        """An app-wide function called by the reset after every active entity was stopped."""
        self._on_reset = fn
        return fn

    def handle_topics(self, fn):
        """Registers fn(Publication), called for every topic's publication (POST
        /kshard/topics/{topic}), beside entity calls: a publication is tied to no entity.
        Returning accepts it; raising kshard.Error answers its status, anything else 500
        Internal (the publisher counts the pod as AppRefused). Without it a publication is
        answered 404. Usable as a decorator."""
        self._on_topic = fn
        return fn

    def active_entities(self):
        return self._table.active_count()

    def respond(self, method, raw_path, headers, body):
        """The answer (a Reply) to a callback; `headers` has lower-case names."""
        path = raw_path.split("?", 1)[0]
        route = _route(path)
        if route is None:
            return error_reply(404, "NotFound", "no such callback: " + path)
        if method != "POST":
            return error_reply(405, "MethodNotAllowed", "callbacks are POST", Allow="POST")
        kind, segments = route
        if kind == "reset":
            return self._reset(headers.get(HEADER_INCARNATION.lower(), ""))
        if kind == "topic":
            return self._topic(segments[0], headers, body)
        names = [_unquote(segment) for segment in segments]
        if None in names:
            return error_reply(400, "InvalidArgument", "bad percent-escape or UTF-8 in " + path)
        if not all(names):
            return error_reply(400, "BadRequest", "entity type and id must not be empty")
        key = (SINGLETON_TYPE, names[0], True) if len(names) == 1 else tuple(names)
        return {"stop": self._stop, "start": self._start}.get(kind, self._message)(
            key, headers, body)

    def _topic(self, escaped, headers, body):
        topic = _unquote(escaped)
        if not topic or "/" in escaped:
            return error_reply(400, "BadRequest", "the topic must be one non-empty path segment")
        fn = self._on_topic
        if fn is None:
            return error_reply(404, "NotFound", "this app takes no topic publications")
        sender = headers.get(HEADER_INCARNATION.lower(), "")
        stale = self._stale(sender)
        if stale:
            return stale
        pub = Publication(topic, headers.get(HEADER_PUBLISHER.lower(), ""), sender, headers, body)
        return _call(lambda: fn(pub), stop=True) or json_reply({})

    def _stale(self, sender):
        reset_by = self._table.stale_sender(sender)
        if reset_by is None:
            return None
        return error_reply(409, "StaleSidecar", f"sent by sidecar process {sender}, not "
                           f"{reset_by}, the one that reset this app")

    def _calls_of(self, key):
        """The handler of an entity's type or of a singleton, or None."""
        if is_singleton(key):
            return self._singletons.get(key[1])
        return self._handlers.get(key[0])

    def _start_fn(self, key):
        """fn(Start) -> Reply or None that runs a start; None when nothing handles the key."""
        handler = self._calls_of(key)
        if handler is None:
            return None
        if is_singleton(key):
            def start_singleton(start):
                handler.on_start(start)  # no Kshard-Passivate: a singleton runs where the spec says
            return start_singleton
        return getattr(handler, "on_start", None) or (lambda start: None)

    @staticmethod
    def _unknown(key):
        if is_singleton(key):
            return error_reply(404, "UnknownSingleton", "no handler for singleton " + key[1])
        return error_reply(404, "UnknownEntityType", "no handler for entity type " + key[0])

    def _in_turn(self, key, sender, fn):
        """fn(entity record) as the entity's call: one at a time for it, the shared gate held
        (a reset waits for it), a stale sidecar process's callback refused."""
        t = self._table
        t.gate.acquire_read()
        try:
            stale = self._stale(sender)
            if stale:
                return stale
            e = t.acquire(key)
            try:
                with e.calls:
                    return fn(e)
            finally:
                t.release(key, e)
        finally:
            t.gate.release_read()

    def _message(self, key, headers, body):
        handler = self._calls_of(key)
        if handler is None:
            return self._unknown(key)
        msg = Message(key[0], key[1], _uint(headers, HEADER_SHARD), _uint(headers, HEADER_EPOCH),
                      headers.get("kshard-mode") or "ask", _uint(headers, HEADER_TURN),
                      headers.get("kshard-incarnation", ""), headers, body)

        def run(e):
            bound, late = self._table.admit(e, msg.turn)
            if late:
                return error_reply(409, "LateMessage", f"turn {msg.turn} of {key[0]} {key[1]} "
                                   f"came after turn or stop {bound} was handled")
            return _call(lambda: handler.on_message(msg))
        return self._in_turn(key, msg.incarnation, run)

    def _start(self, key, headers, body):
        """A start: a turn as a message's; idempotent (200, no call, for one that runs)."""
        start_fn = self._start_fn(key)
        if start_fn is None:
            return self._unknown(key)
        start = Start(key[0], key[1], _uint(headers, HEADER_SHARD), _uint(headers, HEADER_EPOCH),
                      _uint(headers, HEADER_TURN), headers.get("kshard-incarnation", ""), headers)

        def run(e):
            bound, late, need = self._table.admit_start(key, e, start.turn)
            if late:
                return error_reply(409, "LateMessage", f"start turn {start.turn} of {key[0]} "
                                   f"{key[1]} came after turn or stop {bound} was handled")
            if not need:
                return json_reply({})
            reply = _call(lambda: start_fn(start) or json_reply({}))
            self._table.start_done(key, e, 200 <= reply.status < 300)
            return reply
        return self._in_turn(key, start.incarnation, run)

    def _stop(self, key, headers, body=b""):
        t = self._table
        sender = headers.get("kshard-incarnation", "")
        turn = _uint(headers, HEADER_TURN)

        def run(e):
            active, bound = t.state(e)
            handler = self._calls_of(key)
            if active and handler is not None:
                stop = Stop(key[0], key[1], _uint(headers, HEADER_SHARD), max(turn, bound), sender)
                failed = _call(lambda: handler.on_stop(stop), stop=True)
                if failed:
                    return failed  # it stays active: the sidecar asks again
            t.stopped(key, e, turn)
            return json_reply({})
        return self._in_turn(key, sender, run)

    def _reset(self, sender):
        t = self._table
        t.gate.acquire_write()
        try:
            for key in t.begin_reset(sender):
                e = t.get(key)
                _, bound = t.state(e)
                handler = self._calls_of(key)
                if handler is not None:
                    stop = Stop(key[0], key[1], 0, bound, sender, reset=True)
                    failed = _call(lambda: handler.on_stop(stop), stop=True)
                    if failed:
                        return failed
                t.stopped(key, e, bound)
            if self._on_reset is not None:
                failed = _call(self._on_reset, stop=True)
                if failed:
                    return failed
            return json_reply({})
        finally:
            t.gate.release_write()

    def http_server(self, host="127.0.0.1", port=8080):
        """A ThreadingHTTPServer (HTTP/1.1, keep-alive) serving this server's callbacks."""
        return ThreadingHTTPServer((host, port), make_request_handler(self))


def _route(path):
    """(kind, escaped path segments) of a callback's path, or None when it names none."""
    if path == "/kshard/reset":
        return "reset", []
    if path.startswith("/kshard/topics/"):
        return "topic", [path[len("/kshard/topics/"):]]
    # An entity is named by two segments (type, id), a singleton by one (its name).
    for prefix, n in (("/kshard/entities/", 2), ("/kshard/singletons/", 1)):
        if path.startswith(prefix):
            parts = path[len(prefix):].split("/")
            if len(parts) == n:
                return "message", parts
            if len(parts) == n + 1 and parts[n] in ("stop", "start"):
                return parts[n], parts[:n]
    return None


def _no_messages(name, msg):
    raise Error(404, "NotFound", f"singleton {name} takes no messages")


def _call(fn, stop=False):
    """Runs a handler: its Reply (None for stops that succeeded), or the error's answer."""
    try:
        reply = fn()
    except Error as e:
        return error_reply(e.status, e.code, e.message)
    except Exception as e:  # a handler's failure is an answer, not a dropped connection
        log.exception("entity handler failed")
        return error_reply(500, "Internal", f"{type(e).__name__}: {e}")
    if stop:
        return None
    if not isinstance(reply, Reply):
        return Reply()
    # Kshard-* headers on an answer are the sidecar's to set: a Kshard-Error copied from a nested
    # call would make the caller read a delivered message as not delivered.
    reply.headers = {k: v for k, v in reply.headers.items() if not k.lower().startswith("kshard-")}
    if reply.passivate:
        reply.headers[HEADER_PASSIVATE] = "true"
    return reply


def make_request_handler(server, extra=None):
    """A BaseHTTPRequestHandler class serving `server`'s callbacks; `extra(handler)` may answer
    other paths (it returns a Reply, or None for 404). With `server` None it serves `extra`
    only: the handler of an app's public port, where the callbacks must not be reachable (only
    the sidecar may call them, on 127.0.0.1)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "kshard-python"

        def log_message(self, fmt, *args):  # no access log on stderr
            pass

        def _serve(self):
            if server is None or (not self.path.startswith("/kshard/") and extra is not None):
                reply = extra(self) or error_reply(404, "NotFound", "no such path")
                self.send_reply(reply)
                return
            body = self.read_body(server.max_body_bytes)
            if body is None:
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            self.send_reply(server.respond(self.command, self.path, headers, body))

        def read_body(self, limit):
            """The request body, or None once a 413 or 400 was answered."""
            return read_body(self, limit)

        def send_reply(self, reply):
            send_reply(self, reply)

        do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = _serve

    return Handler


def read_body(h, limit):
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        return _read_chunked(h, limit)
    try:
        length = int(h.headers.get("Content-Length") or 0)
    except ValueError:
        length = -1
    if length < 0:
        h.close_connection = True
        send_reply(h, error_reply(400, "BadRequest", "bad Content-Length"))
        return None
    if length > limit:
        # Read and dropped, so that the sender, still writing, gets the answer; the connection
        # then closes.
        _drain(h.rfile, length)
        h.close_connection = True
        send_reply(h, error_reply(413, "PayloadTooLarge", f"the body is over {limit} bytes"))
        return None
    return h.rfile.read(length)


def _drain(rfile, length, most=64 << 20):
    left = min(length, most)
    while left > 0:
        got = rfile.read(min(left, 1 << 16))
        if not got:
            return
        left -= len(got)


def _read_chunked(h, limit):
    chunks, total = [], 0
    while True:
        size = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        total += size
        if total > limit:
            h.close_connection = True
            send_reply(h, error_reply(413, "PayloadTooLarge", f"the body is over {limit} bytes"))
            return None
        chunks.append(h.rfile.read(size))
        h.rfile.readline()


def send_reply(h, reply):
    h.send_response(reply.status)
    for name, value in reply.headers.items():
        if name.lower() not in ("content-length", "connection", "transfer-encoding"):
            h.send_header(name, value)
    h.send_header("Content-Length", str(len(reply.body)))
    if h.close_connection:
        h.send_header("Connection", "close")
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(reply.body)


def serve_in_thread(httpd):
    """Starts httpd.serve_forever on a daemon thread; returns the thread."""
    th = threading.Thread(target=httpd.serve_forever, daemon=True)
    th.start()
    return th
