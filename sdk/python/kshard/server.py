"""The entity server: serves the sidecar's callbacks with the app contract's semantics
(sdk/README.md) on http.server."""

import json
import logging
import re
import threading
import types
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ._table import Table
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
class Reply:
    status: int = 200
    headers: dict = field(default_factory=dict)
    body: bytes = b""


def json_reply(obj, status=200):
    return Reply(status, {"Content-Type": "application/json"}, json.dumps(obj).encode())


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
        self._on_reset = None
        self._on_topic = None
        self._table = Table(stop_bounds_kept_for)

    def handle(self, entity_type, handler=None, *, on_message=None, on_stop=None):
        """Registers the handler of a type: an object with on_message(Message) -> Reply and
        on_stop(Stop), or the two functions (on_stop may be omitted)."""
        if handler is None:
            handler = types.SimpleNamespace(
                on_message=on_message, on_stop=on_stop or (lambda stop: None))
        self._handlers[entity_type] = handler

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
        typ, ident = _unquote(segments[0]), _unquote(segments[1])
        if typ is None or ident is None:
            return error_reply(400, "InvalidArgument", "bad percent-escape or UTF-8 in " + path)
        if not typ or not ident:
            return error_reply(400, "BadRequest", "entity type and id must not be empty")
        if kind == "stop":
            return self._stop((typ, ident), headers)
        return self._message((typ, ident), headers, body)

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

    def _message(self, key, headers, body):
        handler = self._handlers.get(key[0])
        if handler is None:
            return error_reply(404, "UnknownEntityType", "no handler for entity type " + key[0])
        msg = Message(key[0], key[1], _uint(headers, HEADER_SHARD), _uint(headers, HEADER_EPOCH),
                      headers.get("kshard-mode") or "ask", _uint(headers, HEADER_TURN),
                      headers.get("kshard-incarnation", ""), headers, body)
        t = self._table
        t.gate.acquire_read()
        try:
            stale = self._stale(msg.incarnation)
            if stale:
                return stale
            e = t.acquire(key)
            try:
                with e.calls:
                    bound, late = t.admit(e, msg.turn)
                    if late:
                        return error_reply(409, "LateMessage", f"turn {msg.turn} of {key[0]} "
                                           f"{key[1]} came after turn or stop {bound} was handled")
                    return _call(lambda: handler.on_message(msg))
            finally:
                t.release(key, e)
        finally:
            t.gate.release_read()

    def _stop(self, key, headers):
        t = self._table
        sender = headers.get("kshard-incarnation", "")
        turn = _uint(headers, HEADER_TURN)
        t.gate.acquire_read()
        try:
            stale = self._stale(sender)
            if stale:
                return stale
            e = t.acquire(key)
            try:
                with e.calls:
                    active, bound = t.state(e)
                    handler = self._handlers.get(key[0])
                    if active and handler is not None:
                        stop = Stop(key[0], key[1], _uint(headers, HEADER_SHARD), max(turn, bound),
                                    sender)
                        failed = _call(lambda: handler.on_stop(stop), stop=True)
                        if failed:
                            return failed  # it stays active: the sidecar asks again
                    t.stopped(key, e, turn)
                    return json_reply({})
            finally:
                t.release(key, e)
        finally:
            t.gate.release_read()

    def _reset(self, sender):
        t = self._table
        t.gate.acquire_write()
        try:
            for key in t.begin_reset(sender):
                e = t.get(key)
                _, bound = t.state(e)
                handler = self._handlers.get(key[0])
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
    prefix = "/kshard/entities/"
    parts = path[len(prefix):].split("/") if path.startswith(prefix) else []
    if len(parts) == 2:
        return "message", parts
    if len(parts) == 3 and parts[2] == "stop":
        return "stop", parts[:2]
    return None


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
