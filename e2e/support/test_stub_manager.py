#!/usr/bin/env python3
"""Unit tests of stub_manager.py: run it on a free port, register pods, read the map, and catch
the assign it sends on a fake peer API. No cluster, no sidecar: python3 test_stub_manager.py."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakePeer:
    """Records the assign calls a pod's peer API receives."""

    def __init__(self):
        self.calls = []
        self.got = threading.Event()
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                peer.calls.append((self.path, self.headers.get("Authorization"), body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
                peer.got.set()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class StubManagerTest(unittest.TestCase):
    def start(self, *extra):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "stub_manager.py"),
                                      str(self.port), "ns", "m", "8", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(self.proc.wait)
        self.addCleanup(self.proc.kill)
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        self.fail("the stub manager is not listening")

    def call(self, verb, body=None):
        url = f"http://127.0.0.1:{self.port}/v1/shardmaps/ns/m/{verb}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def register(self, pod, address):
        return self.call("register", {"pod": pod, "uid": pod + "-uid", "address": address,
                                      "incarnation": pod + "-1"})

    def test_owner_takes_every_shard_and_others_none(self):
        peer = FakePeer()
        with tempfile.NamedTemporaryFile("w", suffix=".token") as token:
            token.write("secret\n")
            token.flush()
            self.start("--owner", "b", "--token-file", token.name, "--entity-idle-timeout", "2h")
            self.assertEqual(self.register("a", "127.0.0.1:1"), (200, {"epoch": 1}))
            status, m = self.call("assignments")
            self.assertEqual(m["status"]["assignments"], [])
            self.assertEqual(m["status"]["unassigned"], "1-8")
            self.assertEqual(m["spec"]["entityIdleTimeout"], "2h")
            self.assertEqual(m["spec"]["sendTimeout"], "10s")
            self.assertEqual(self.register("b", peer.address), (200, {"epoch": 2}))
            self.assertTrue(peer.got.wait(5))
        path, auth, body = peer.calls[0]
        self.assertEqual((path, auth), ("/v1/shards/assign", "Bearer secret"))
        self.assertEqual(body, {"shardMap": "ns/m", "epoch": 2, "pod": "b", "uid": "b-uid",
                                "incarnation": "b-1", "shards": "1-8"})
        _, m = self.call("assignments")
        self.assertEqual(m["status"]["assignments"], [{"pod": "b", "epoch": 2, "shards": "1-8"}])
        self.assertEqual({p["name"]: p["shards"] for p in m["status"]["pods"]}, {"a": 0, "b": 8})
        # The lease: the registered process only.
        self.assertEqual(self.call("renew", {"pod": "b", "uid": "b-uid", "incarnation": "b-1"}),
                         (200, {"epoch": 2}))
        status, err = self.call("renew", {"pod": "b", "uid": "b-uid", "incarnation": "b-0"})
        self.assertEqual((status, err["error"]["code"]), (404, "PodNotAlive"))
        self.assertEqual(self.call("unregister", {"pod": "b", "uid": "b-uid"}), (200, {"epoch": 3}))
        _, m = self.call("assignments")
        self.assertEqual((m["status"]["assignments"], m["status"]["unassignedCount"]), ([], 8))
        self.assertEqual(self.call("notify-unhealthy", {"pod": "a"}), (202, {"accepted": True}))

    def test_without_owner_the_last_registered_pod_takes_every_shard(self):
        first, second = FakePeer(), FakePeer()
        self.start("--send-timeout", "2s")
        self.register("a", first.address)
        self.assertTrue(first.got.wait(5))
        self.register("b", second.address)
        self.assertTrue(second.got.wait(5))
        self.assertIsNone(first.calls[0][1])  # no token
        _, m = self.call("assignments")
        self.assertEqual(m["status"]["assignments"], [{"pod": "b", "epoch": 2, "shards": "1-8"}])
        self.assertEqual(m["spec"]["sendTimeout"], "2s")
        status, err = self.call("nonsense", {})
        self.assertEqual((status, err["error"]["code"]), (404, "NotFound"))


if __name__ == "__main__":
    unittest.main()
