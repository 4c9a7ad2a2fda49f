"""The contract suite's harness: an app process started from a command template, the sidecar's
side of the callbacks, and a fake sidecar app API for the app's public face."""

import http.client
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def escape(text):
    return "".join(chr(b) if b in UNRESERVED else "%%%02X" % b for b in text.encode())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=b"", headers=None, timeout=30):
    """(status, headers with lower-case names, body) of one request on a new connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read()
    finally:
        conn.close()


def error_code(body):
    """The code of kshard's error shape {"error": {"code", "message"}}, or None."""
    try:
        err = json.loads(body)["error"]
        return err["code"] if isinstance(err["code"], str) and isinstance(err["message"], str) else None
    except (ValueError, TypeError, KeyError):
        return None


class App:
    """One app process from the template (placeholders: {app_port} {public_port} {sidecar_port}
    {state_dir} {event_log} {pod}); `state_dir` may be shared with another App."""

    def __init__(self, template, pod="contract-pod", state_dir=None):
        self.dir = tempfile.mkdtemp(prefix="kshard-contract-")
        self.app_port, self.public_port, self.sidecar_port = free_port(), free_port(), free_port()
        self.pod = pod
        self.state_dir = state_dir or os.path.join(self.dir, "state")
        self.event_log = os.path.join(self.dir, "events.log")
        cmd = template.format(app_port=self.app_port, public_port=self.public_port,
                              sidecar_port=self.sidecar_port, state_dir=self.state_dir,
                              event_log=self.event_log, pod=pod)
        self.log = open(os.path.join(self.dir, "app.log"), "wb")
        self.proc = subprocess.Popen(shlex.split(cmd), stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._wait_listening()

    def _wait_listening(self, seconds=20):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the app exited with {self.proc.returncode}: {self.output()}")
            try:
                socket.create_connection(("127.0.0.1", self.app_port), 0.2).close()
                socket.create_connection(("127.0.0.1", self.public_port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("the app did not listen within %ss" % seconds)

    def output(self):
        with open(os.path.join(self.dir, "app.log"), "rb") as f:
            return f.read().decode("utf-8", "replace")[-2000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if not os.environ.get("KSHARD_CONTRACT_KEEP"):  # set it to keep logs and state
            shutil.rmtree(self.dir, ignore_errors=True)

    def events(self):
        try:
            with open(self.event_log, "rb") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    # The sidecar's side of the callbacks.
    def message(self, ident, body=b"", typ="counter", turn=None, epoch=1, shard=1,
                incarnation=None, **headers):
        h = {"Kshard-Shard": str(shard), "Kshard-Epoch": str(epoch), "Kshard-Mode": "ask",
             "Content-Type": "application/json", **headers}
        if turn is not None:
            h["Kshard-Turn"] = str(turn)
        if incarnation is not None:
            h["Kshard-Incarnation"] = incarnation
        return request(self.app_port, "POST", f"/kshard/entities/{escape(typ)}/{escape(ident)}",
                       body, h)

    def increment(self, ident, by=1, **kw):
        return self.message(ident, json.dumps({"op": "increment", "by": by}).encode(), **kw)

    def stop_entity(self, ident, typ="counter", turn=None, shard=1, incarnation=None):
        h = {"Kshard-Shard": str(shard)}
        if turn is not None:
            h["Kshard-Turn"] = str(turn)
        if incarnation is not None:
            h["Kshard-Incarnation"] = incarnation
        return request(self.app_port, "POST",
                       f"/kshard/entities/{escape(typ)}/{escape(ident)}/stop", b"", h)

    def reset(self, incarnation):
        return request(self.app_port, "POST", "/kshard/reset", b"",
                       {"Kshard-Incarnation": incarnation}, timeout=60)


class FakeSidecar:
    """The sidecar's app API for one pod: delivers to the app's callbacks one message at a time
    per entity with increasing turns, adds Kshard-Owner; `refuse` makes it answer a sidecar
    error instead, as (status, code)."""

    def __init__(self, app):
        self.app, self.turn, self.refuse = app, 0, None
        self.mu, self.locks = threading.Lock(), {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, out = fake.deliver(self.path, body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                # One request a connection: once closed, this fake answers nothing more.
                self.send_header("Connection", "close")
                self.close_connection = True
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", app.sidecar_port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def deliver(self, path, body):
        if self.refuse:
            status, code = self.refuse
            out = json.dumps({"error": {"code": code, "message": "fake"}}).encode()
            return status, {"Kshard-Error": code, "Content-Type": "application/json"}, out
        parts = urllib.parse.urlsplit(path).path.split("/")  # "", v1, entities, type, id
        typ, ident = urllib.parse.unquote(parts[3]), urllib.parse.unquote(parts[4])
        with self.mu:
            lock = self.locks.setdefault((typ, ident), threading.Lock())
        with lock:
            with self.mu:
                self.turn += 1
                turn = self.turn
            status, headers, out = self.app.message(ident, body, typ=typ, turn=turn,
                                                    incarnation="fake-sidecar")
        keep = {k: v for k, v in headers.items() if k in ("content-type",)}
        return status, {**keep, "Kshard-Owner": "fake-pod"}, out

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
