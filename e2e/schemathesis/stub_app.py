#!/usr/bin/env python3
"""A stand-in for the app behind the sidecar: answers every entity message 200 with a small JSON
body naming the entity, and every start, stop, singleton, reset and topic callback 200.

Usage: stub_app.py PORT
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1])


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if (self.path.startswith(("/kshard/entities/", "/kshard/singletons/", "/kshard/topics/"))
                or self.path == "/kshard/reset"):
            data = json.dumps({"path": self.path,
                               "shard": self.headers.get("Kshard-Shard"),
                               "epoch": self.headers.get("Kshard-Epoch")}).encode()
            self.send_response(200)
        else:
            data = b'{"error":{"code":"NotFound","message":"stub app"}}'
            self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
