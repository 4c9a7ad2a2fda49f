"""python-counter: options, servers and shutdown (see counter.py and `main.py --help`)."""

import argparse
import os
import signal
import sys
import threading
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk",
                                "python"))

import kshard  # noqa: E402
from counter import Counters  # noqa: E402
from store import Store  # noqa: E402


def parse_options(argv):
    """Flags over the environment over the defaults, as kshard-counter does."""
    env = os.environ.get
    p = argparse.ArgumentParser(prog="python-counter", description="kshard's example app in "
                                "Python: counters as entities, reached through the sidecar.")
    p.add_argument("--app-port", type=int, default=int(env("KSHARD_APP_PORT", 8080)),
                   help="Port of the entity callbacks on 127.0.0.1 ($KSHARD_APP_PORT).")
    p.add_argument("--public-port", type=int, default=int(env("COUNTER_PUBLIC_PORT", 8081)),
                   help="Port of the public API on all addresses ($COUNTER_PUBLIC_PORT).")
    p.add_argument("--sidecar-port", type=int, default=int(env("KSHARD_API_PORT", 7100)),
                   help="Port of the sidecar's app API on 127.0.0.1 ($KSHARD_API_PORT).")
    p.add_argument("--pod", default=env("POD_NAME", "counter"),
                   help="This pod's name, written into events ($POD_NAME).")
    p.add_argument("--state-dir", default=env("COUNTER_STATE_DIR", "/tmp/kshard-counter-state"),
                   help="Directory shared by all pods for counter state ($COUNTER_STATE_DIR).")
    p.add_argument("--event-log", default=env("COUNTER_EVENT_LOG", ""),
                   help="Shared JSON-lines file of activations and stops ($COUNTER_EVENT_LOG).")
    p.add_argument("--shutdown-grace-seconds", type=float,
                   default=float(env("COUNTER_SHUTDOWN_GRACE_SECONDS", 15)),
                   help="After SIGTERM, how long requests in flight may still finish "
                   "($COUNTER_SHUTDOWN_GRACE_SECONDS).")
    return p.parse_args(argv)


def public_api(sidecar):
    """The `extra` of make_request_handler: /healthz and the counters' public API."""
    def forward(ident, body):
        try:
            r = sidecar.ask("counter", ident, body)
        except kshard.SidecarError as e:
            return kshard.error_reply(e.status or 502, e.code, e.message, **{"Kshard-Error": e.code})
        except kshard.KshardError as e:
            return kshard.error_reply(502, "SidecarUnavailable", str(e))
        headers = {k: v for k, v in r.headers.items() if k not in ("content-length", "connection")}
        return kshard.Reply(r.status, headers, r.body)

    def serve(h):
        url = urllib.parse.urlsplit(h.path)
        parts = url.path.split("/")
        if h.command == "GET" and url.path == "/healthz":
            return kshard.json_reply({"status": "ok"})
        if len(parts) < 3 or parts[1] != "counters" or not parts[2] or len(parts) > 4:
            return None
        ident = urllib.parse.unquote(parts[2])
        if len(parts) == 4 and parts[3] == "increment" and h.command == "POST":
            h.rfile.read(int(h.headers.get("Content-Length") or 0))
            by = urllib.parse.parse_qs(url.query).get("by", ["1"])[0]
            try:
                by = int(by)
            except ValueError:
                return kshard.error_reply(400, "BadRequest", "by must be an integer")
            return forward(ident, f'{{"op":"increment","by":{by}}}')
        if len(parts) == 3 and h.command == "GET":
            return forward(ident, '{"op":"get"}')
        return kshard.error_reply(405, "MethodNotAllowed",
                                  "POST /counters/{id}/increment, GET /counters/{id}")
    return serve


def main(argv):
    o = parse_options(argv)
    os.makedirs(o.state_dir, exist_ok=True)
    counters = Counters(Store(o.state_dir), o.pod, o.event_log)
    server = kshard.EntityServer()
    server.handle("counter", counters)
    server.on_reset(lambda: print(f"python-counter {o.pod}: reset: every counter saved and "
                                  "forgotten", file=sys.stderr))
    sidecar = kshard.Client(port=o.sidecar_port, timeout=60)
    entity_httpd = server.http_server("127.0.0.1", o.app_port)
    public_httpd = kshard.ThreadingHTTPServer(
        ("0.0.0.0", o.public_port), kshard.make_request_handler(None, public_api(sidecar)))
    for httpd in (entity_httpd, public_httpd):
        httpd.daemon_threads = False  # requests in flight finish at shutdown (server_close)
        kshard.serve_in_thread(httpd)
    print(f"python-counter {o.pod}: serving entities on 127.0.0.1:{o.app_port}, public on "
          f"0.0.0.0:{o.public_port}", file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    # The sidecar stopped every counter in its drain; a public request may still wait in the
    # sidecar for its shard's new owner: new connections are refused, those in flight finish.
    print(f"python-counter {o.pod}: stopping, {len(counters.active)} active counters",
          file=sys.stderr, flush=True)
    for httpd in (public_httpd, entity_httpd):
        httpd.shutdown()
    closer = threading.Thread(target=lambda: [h.server_close() for h in (public_httpd, entity_httpd)],
                              daemon=True)
    closer.start()
    closer.join(o.shutdown_grace_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
