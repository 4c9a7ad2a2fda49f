import socket
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.helpers import kshard


class FakeSidecar:
    """The sidecar's app API, answering with `answer(handler, body)` -> (status, headers, body);
    counts the connections it accepted."""

    def __init__(self, answer):
        fake = self
        self.connections = 0
        self.requests = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                fake.connections += 1
                super().setup()

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.requests.append((self.path, dict(self.headers)))
                status, headers, out = answer(self, body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                try:
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (the timeout tests)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        kshard.serve_in_thread(self.httpd)
        self.client = kshard.Client(port=self.httpd.server_address[1], timeout=5)

    def close(self):
        self.client.close()
        self.httpd.shutdown()
        self.httpd.server_close()


def sidecar_error(status, code):
    return status, {"Kshard-Error": code, "Content-Type": "application/json"}, \
        kshard.error_body(code, "from the fake sidecar")


class ClientTest(unittest.TestCase):
    def fake(self, answer):
        f = FakeSidecar(answer)
        self.addCleanup(f.close)
        return f

    def test_ask_returns_the_apps_answer_errors_included(self):
        def answer(h, body):
            if h.path.endswith("/conflict"):
                return 409, {"Kshard-Owner": "pod-1"}, kshard.error_body("Fenced", "newer owner")
            return 200, {"Kshard-Owner": "pod-1"}, b'{"value":3}'
        f = self.fake(answer)
        r = f.client.ask("counter", "a", b"{}", idempotency_key="k")
        self.assertEqual((r.status, r.owner, r.json(), r.app_error()), (200, "pod-1", {"value": 3}, None))
        path, headers = f.requests[0]
        self.assertEqual((path, headers["Idempotency-Key"]), ("/v1/entities/counter/a", "k"))
        r = f.client.ask("counter", "conflict")
        self.assertEqual((r.status, r.app_error().code), (409, "Fenced"))

    def test_sidecar_errors_are_typed(self):
        cases = [(400, "BadRequest", kshard.BadRequestError, False),
                 (502, "AppUnavailable", kshard.AppUnavailableError, False),
                 (502, "OutcomeUnknown", kshard.OutcomeUnknownError, True),
                 (504, "OutcomeUnknown", kshard.OutcomeUnknownError, True),
                 (503, "NotReady", kshard.NotReadyError, False),
                 (503, "EntityOverloaded", kshard.EntityOverloadedError, False),
                 (504, "SendTimeout", kshard.SendTimeoutError, False)]
        for status, code, cls, delivered in cases:
            f = self.fake(lambda h, b, s=status, c=code: sidecar_error(s, c))
            with self.assertRaises(cls) as ctx:
                f.client.ask("counter", "a")
            self.assertEqual((ctx.exception.status, ctx.exception.code, ctx.exception.delivered),
                             (status, code, delivered))
            with self.assertRaises(cls):
                f.client.tell("counter", "a")
        f = self.fake(lambda h, b: (413, {}, kshard.error_body("PayloadTooLarge", "over 4 MiB")))
        with self.assertRaises(kshard.PayloadTooLargeError):
            f.client.ask("counter", "a")

    def test_tell_asks_for_tell_mode(self):
        f = self.fake(lambda h, b: (202, {"Kshard-Owner": "p"}, b""))
        f.client.tell("counter", "a", b'{"op":"increment"}')
        self.assertEqual(f.requests[0][0], "/v1/entities/counter/a?mode=tell")

    def test_a_timeout_leaves_the_outcome_unknown(self):
        release = threading.Event()
        self.addCleanup(release.set)
        f = self.fake(lambda h, b: (release.wait(10), (200, {}, b""))[1])
        start = time.monotonic()
        with self.assertRaises(kshard.CallTimeoutError) as ctx:
            f.client.ask("counter", "a", b"x", timeout=0.05)
        self.assertIsInstance(ctx.exception, kshard.OutcomeUnknownError)
        self.assertIsInstance(ctx.exception, TimeoutError)
        self.assertLess(time.monotonic() - start, 2)

    def test_an_unreachable_sidecar_delivered_nothing(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with self.assertRaises(kshard.SidecarUnavailableError) as ctx:
            kshard.Client(port=port).ask("counter", "a")
        self.assertFalse(ctx.exception.delivered)
        self.assertNotIsInstance(ctx.exception, kshard.OutcomeUnknownError)

    def test_unicode_ids_large_bodies_and_connection_reuse(self):
        ident = "ü/日本 🙂%+?#"
        f = self.fake(lambda h, b: (200, {"Kshard-Owner": "p"}, b))
        body = "é".encode() * (kshard.DEFAULT_MAX_BODY_BYTES // 2)
        for _ in range(5):
            self.assertEqual(f.client.ask("counter", ident, body).body, body)
        for _ in range(20):
            f.client.ask("counter", ident, b"{}")
        self.assertEqual(f.requests[0][0], "/v1/entities/counter/" + kshard.path_escape(ident))
        self.assertEqual(kshard.path_escape("a/b c~"), "a%2Fb%20c~")
        self.assertEqual(f.connections, 1)

    def test_a_connection_the_sidecar_closed_is_not_reused(self):
        def answer(h, b):
            h.close_connection = True
            return 200, {"Kshard-Owner": "p"}, b"{}"
        f = self.fake(answer)
        for _ in range(3):
            self.assertEqual(f.client.ask("counter", "a").status, 200)
            time.sleep(0.02)
        self.assertEqual(f.connections, 3)


if __name__ == "__main__":
    unittest.main()
