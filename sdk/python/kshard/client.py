"""The client of the sidecar's app API: ask (request and reply) and tell (fire and forget)."""

import http.client
import json
import os
import select
import socket
import threading
import time

from .errors import (CallTimeoutError, Error, OutcomeUnknownError, SidecarUnavailableError,
                     decode_error, sidecar_error)
from .server import HEADER_ERROR, HEADER_IDEMPOTENCY_KEY, HEADER_OWNER
from .topics import PublishResult

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def path_escape(text):
    """Percent-encodes every byte but RFC 3986's unreserved ones, as the sidecar does."""
    return "".join(chr(b) if b in _UNRESERVED else "%%%02X" % b for b in text.encode("utf-8"))


class Response:
    """The owner app's answer to an ask, whatever its status."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # names in lower case
        self.body = body
        self.owner = headers.get(HEADER_OWNER.lower(), "")

    def json(self):
        return json.loads(self.body)

    def app_error(self):
        """The app's error (an errors.Error) when the status is 4xx or 5xx, else None."""
        if self.status < 400:
            return None
        decoded = decode_error(self.body)
        if decoded is None:
            return Error(self.status, str(self.status), self.body[:256].decode("utf-8", "replace"))
        return Error(self.status, *decoded)


class Client:
    """Sends messages to entities through the local sidecar; thread-safe; reuses its
    connections (a pool of keep-alive HTTP/1.1 connections). Make one per process."""

    def __init__(self, host="127.0.0.1", port=None, timeout=60.0, max_idle=16):
        self.host = host
        self.port = int(port or os.environ.get("KSHARD_API_PORT") or 7100)
        self.timeout = timeout
        self.max_idle = max_idle
        self._idle = []
        self._mu = threading.Lock()

    def close(self):
        with self._mu:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def ask(self, entity_type, entity_id, body=b"", *, timeout=None, headers=None,
            idempotency_key=None, content_type="application/json"):
        """Sends body to the entity and returns its app's Response. Raises a SidecarError
        subclass for the sidecar's own errors (OutcomeUnknownError included),
        SidecarUnavailableError when nothing was sent, CallTimeoutError (an
        OutcomeUnknownError) when the call's timeout ran out after it was sent."""
        return self._send(entity_type, entity_id, "", body, timeout, headers, idempotency_key,
                          content_type)

    def tell(self, entity_type, entity_id, body=b"", *, timeout=None, headers=None,
             idempotency_key=None, content_type="application/json"):
        """Sends body and returns once its owner queued it (202); the app's answer is dropped."""
        r = self._send(entity_type, entity_id, "?mode=tell", body, timeout, headers,
                       idempotency_key, content_type)
        if r.status != 202:
            raise Error(r.status, "UnexpectedAnswer", f"tell answered {r.status}, not 202")

    def publish(self, topic, body=b"", *, entities=None, timeout=None, headers=None,
                idempotency_key=None, content_type="application/json"):
        """Sends body once to every pod of the ShardMap, whose apps get it through their topic
        handler (EntityServer.handle_topics); with `entities` (an entity type), as a tell to
        every entity of that type active on any pod instead. Each pod gets it at most once;
        returns a PublishResult saying which did. Raises as ask does."""
        path = "/v1/topics/" + path_escape(topic)
        if entities is not None:
            path += "?entities=" + path_escape(entities)
        r = self._post(path, body, timeout, headers, idempotency_key, content_type)
        if r.status != 200:
            raise Error(r.status, "UnexpectedAnswer", f"publish answered {r.status}, not 200")
        try:
            return PublishResult.from_json(r.json())
        except (ValueError, TypeError, AttributeError) as e:
            raise Error(r.status, "UnexpectedAnswer", f"the publish answer is not one: {e}") from e

    def _send(self, typ, ident, query, body, timeout, headers, key, content_type):
        path = f"/v1/entities/{path_escape(typ)}/{path_escape(ident)}{query}"
        return self._post(path, body, timeout, headers, key, content_type)

    def _post(self, path, body, timeout, headers, key, content_type):
        if isinstance(body, str):
            body = body.encode("utf-8")
        hdrs = {"Content-Type": content_type, "Content-Length": str(len(body))}
        if key is not None:
            hdrs[HEADER_IDEMPOTENCY_KEY] = key
        hdrs.update(headers or {})
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        conn = self._take(deadline)
        sent = False
        try:
            conn.putrequest("POST", path, skip_accept_encoding=True)
            for name, value in hdrs.items():
                conn.putheader(name, value)
            conn.endheaders()
            conn.send(body)
            sent = True
            conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
            res = conn.getresponse()
            data = res.read()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            if isinstance(e, socket.timeout) and sent:
                raise CallTimeoutError(None, "OutcomeUnknown", f"no answer in time: {e}") from e
            if not sent and not isinstance(e, socket.timeout):
                raise SidecarUnavailableError(f"the sidecar could not be reached: {e}") from e
            raise OutcomeUnknownError(None, "OutcomeUnknown",
                                      f"the exchange with the sidecar broke: {e}") from e
        self._give(conn, res)
        rheaders = {k.lower(): v for k, v in res.getheaders()}
        error = _sidecar_error(res.status, rheaders, data)
        if error is not None:
            raise error
        return Response(res.status, rheaders, data)

    def _take(self, deadline):
        """An idle connection the sidecar has not closed, or a new one."""
        while True:
            with self._mu:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                break
            # An idle connection with something to read has been closed by the sidecar.
            if conn.sock is not None and not select.select([conn.sock], [], [], 0)[0]:
                conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
                return conn
            conn.close()
        conn = http.client.HTTPConnection(self.host, self.port,
                                          timeout=max(0.001, deadline - time.monotonic()))
        try:
            conn.connect()
        except OSError as e:
            raise SidecarUnavailableError(f"the sidecar could not be reached: {e}") from e
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _give(self, conn, res):
        if res.will_close:
            conn.close()
            return
        with self._mu:
            if len(self._idle) < self.max_idle:
                self._idle.append(conn)
                return
        conn.close()


def _sidecar_error(status, headers, body):
    """The sidecar's own error: one with Kshard-Error, or (the HTTP layer's 413 and 400 carry
    none) an error-shaped 4xx/5xx without Kshard-Owner, which every app answer has."""
    code = headers.get(HEADER_ERROR.lower(), "")
    if not code and (status < 400 or headers.get(HEADER_OWNER.lower())):
        return None
    decoded = decode_error(body)
    if not code:
        if decoded is None:
            return None
        code = decoded[0]
    message = decoded[1] if decoded else body[:256].decode("utf-8", "replace")
    return sidecar_error(status, code, message)
