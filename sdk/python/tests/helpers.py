import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import kshard  # noqa: E402

# The contract suite's harness (sdk/contract): a raw HTTP request, independent of the SDK.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "contract"))
from harness import request  # noqa: E402


class Recorder:
    """A handler that records its calls and the calls running at once."""

    def __init__(self):
        self.mu = threading.Lock()
        self.messages, self.stops = [], []
        self.running, self.max_per, self.now, self.max_all = {}, 0, 0, 0
        self.delay, self.stop_error, self.block = 0.0, None, None

    def on_message(self, msg):
        with self.mu:
            self.messages.append(msg)
            self.running[msg.id] = self.running.get(msg.id, 0) + 1
            self.max_per = max(self.max_per, self.running[msg.id])
            self.now += 1
            self.max_all = max(self.max_all, self.now)
        if self.block is not None:
            self.block.wait()
        time.sleep(self.delay)
        with self.mu:
            self.running[msg.id] -= 1
            self.now -= 1
        return kshard.json_reply({"id": msg.id, "bytes": len(msg.body)})

    def on_stop(self, stop):
        with self.mu:
            if self.stop_error is not None:
                raise self.stop_error
            self.stops.append(stop)


def start(handler_class_or_server, port=0):
    """Serves on 127.0.0.1; returns (httpd, port)."""
    httpd = handler_class_or_server.http_server("127.0.0.1", port)
    kshard.serve_in_thread(httpd)
    return httpd, httpd.server_address[1]


def post(port, path, body=b"", headers=None, method="POST"):
    """(status, headers with lower-case names, body): the contract suite's raw request."""
    return request(port, method, path, body, headers)


class ServerCase(unittest.TestCase):
    """A test against an EntityServer (self.server) served on 127.0.0.1 (self.port)."""

    def setUp(self):
        self.server = kshard.EntityServer()
        self.httpd, self.port = start(self.server)
        self.addCleanup(self.httpd.server_close)
        self.addCleanup(self.httpd.shutdown)

    def post(self, path, body=b"", **headers):
        """post() with headers as keywords, "_" for "-" (Kshard_Turn="3")."""
        return post(self.port, path, body, {k.replace("_", "-"): v for k, v in headers.items()})


def code_of(body):
    decoded = kshard.decode_error(body)
    return decoded[0] if decoded else None


# Handlers that fail on purpose log their traceback: not on the test's output.
import logging  # noqa: E402

logging.getLogger("kshard").propagate = False
logging.getLogger("kshard").addHandler(logging.NullHandler())
