#!/usr/bin/env python3
"""A stand-in for kshard-operator's manager API, enough for one sidecar under test.

Serves POST /v1/shardmaps/{ns}/{name}/register|unregister|renew|notify-unhealthy and
GET .../assignments for one ShardMap, like the stub operator of
tests/sidecar/sidecar_component_test.cc: a registering pod is recorded, the new map is persisted
(the epoch goes up) and only then are all shards assigned to it on its peer API (write-ahead, as
the operator does). Prints one line per call on stdout, which run.sh keeps as a log.

Usage: stub_manager.py PORT NAMESPACE NAME SHARDS
"""
import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, NAMESPACE, NAME, SHARDS = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
BASE = f"/v1/shardmaps/{NAMESPACE}/{NAME}/"
LOCK = threading.Lock()
STATE = {"epoch": 0, "pods": [], "assignments": []}


def shard_map():
    with LOCK:
        pods = [dict(p) for p in STATE["pods"]]
        assignments = [dict(a) for a in STATE["assignments"]]
        epoch = STATE["epoch"]
    assigned = {a["pod"] for a in assignments}
    for p in pods:
        p["shards"] = SHARDS if p["name"] in assigned else 0
    return {
        "apiVersion": "kshard.io/v1alpha1",
        "kind": "ShardMap",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": "stub", "generation": 1},
        "spec": {"shards": SHARDS, "sendTimeout": "2s", "handoffTimeout": "2s",
                 "entityIdleTimeout": "30s", "pingTimeout": "1s"},
        "status": {
            "observedGeneration": 1,
            "epoch": epoch,
            "manager": {"pod": "stub-manager", "address": f"127.0.0.1:{PORT}"},
            "pods": pods,
            "assignments": assignments,
            "unassigned": "" if assignments else f"1-{SHARDS}",
            "podCount": len(pods),
            "unassignedCount": 0 if assignments else SHARDS,
            "conditions": [],
        },
    }


def assign_all(pod, epoch):
    body = json.dumps({"shardMap": f"{NAMESPACE}/{NAME}", "pod": pod["name"], "uid": pod["uid"],
                       "incarnation": pod["incarnation"], "epoch": epoch,
                       "shards": f"1-{SHARDS}"}).encode()
    address = pod["address"]
    req = urllib.request.Request(f"http://{address}/v1/shards/assign", data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        print(f"assign 1-{SHARDS} at epoch {epoch} to {address}: {r.status}", flush=True)


class Handler(BaseHTTPRequestHandler):
    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status, code, message):
        self._send(status, {"error": {"code": code, "message": message}})

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self):
        if self.path == BASE + "assignments":
            self._send(200, shard_map())
        else:
            self._error(404, "NotFound", self.path)

    def do_POST(self):
        if not self.path.startswith(BASE):
            self._error(404, "NotFound", self.path)
            return
        verb = self.path[len(BASE):]
        body = self._body()
        print(f"{verb} {json.dumps(body)}", flush=True)
        if verb == "register":
            pod = {"name": body["pod"], "uid": body["uid"], "address": body["address"],
                   "version": body.get("version", ""), "incarnation": body.get("incarnation", "")}
            with LOCK:
                STATE["pods"] = [p for p in STATE["pods"] if p["name"] != body["pod"]] + [pod]
                STATE["epoch"] += 1
                epoch = STATE["epoch"]
                STATE["assignments"] = [{"pod": body["pod"], "epoch": epoch,
                                         "shards": f"1-{SHARDS}"}]
            self._send(200, {"epoch": epoch})
            threading.Thread(target=assign_all, args=(pod, epoch)).start()
        elif verb == "renew":
            with LOCK:
                known = any(p["name"] == body.get("pod") and
                            p["incarnation"] == body.get("incarnation") for p in STATE["pods"])
                epoch = STATE["epoch"]
            if known:
                self._send(200, {"epoch": epoch})
            else:
                self._error(404, "PodNotAlive", "not registered")
        elif verb == "unregister":
            with LOCK:
                STATE["pods"] = [p for p in STATE["pods"] if p["name"] != body["pod"]]
                STATE["assignments"] = [a for a in STATE["assignments"] if a["pod"] != body["pod"]]
                STATE["epoch"] += 1
                epoch = STATE["epoch"]
            self._send(200, {"epoch": epoch})
        elif verb == "notify-unhealthy":
            self._send(202, {"accepted": True})
        else:
            self._error(404, "NotFound", self.path)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
