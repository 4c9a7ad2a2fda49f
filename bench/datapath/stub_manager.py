#!/usr/bin/env python3
"""The manager API for the data-path benchmark: one ShardMap whose every shard belongs to OWNER.

Serves, for ShardMap NAMESPACE/NAME, what kshard-sidecar --map-source=manager calls:
POST .../register|unregister|renew|notify-unhealthy and GET .../assignments. Every pod that
registers is listed in the map; when OWNER registers, the map is persisted at a new epoch with all SHARDS
shards on it (write-ahead, as the operator does) and only then assigned on its peer API. Every
other pod holds nothing, so each message sent through it is forwarded to OWNER. The map's
entityIdleTimeout is long, so that no entity is stopped while the benchmark runs.

Not on the data path: the sidecars only poll the map (once a second) and register once.
Prints one line per control call on stdout, which run.sh keeps as a log.

With TOKEN_FILE, the assign call carries its content as a bearer token (the operator's token,
for sidecars with --peer-auth=token).

Usage: stub_manager.py PORT NAMESPACE NAME SHARDS OWNER [TOKEN_FILE]
"""
import json
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, NAMESPACE, NAME = int(sys.argv[1]), sys.argv[2], sys.argv[3]
SHARDS, OWNER = int(sys.argv[4]), sys.argv[5]
TOKEN = open(sys.argv[6]).read().strip() if len(sys.argv) > 6 else ""
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
        "metadata": {"name": NAME, "namespace": NAMESPACE, "uid": "bench", "generation": 1},
        "spec": {"shards": SHARDS, "sendTimeout": "10s", "handoffTimeout": "30s",
                 "entityIdleTimeout": "1h", "pingTimeout": "3s"},
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


def assign_all(target, epoch):
    address = target["address"]
    # Addressed to the registered process: the sidecar refuses a command for another.
    body = json.dumps({"shardMap": f"{NAMESPACE}/{NAME}", "epoch": epoch,
                       "pod": target["pod"], "uid": target["uid"],
                       "incarnation": target.get("incarnation", ""),
                       "shards": f"1-{SHARDS}"}).encode()
    headers = {"Content-Type": "application/json"}
    if TOKEN:
        headers["Authorization"] = "Bearer " + TOKEN
    req = urllib.request.Request(f"http://{address}/v1/shards/assign", data=body,
                                 headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            print(f"assign 1-{SHARDS} at epoch {epoch} to {address}: {r.status}", flush=True)
    except OSError as e:
        # The sidecar also takes the shards from the polled map; this only makes it sooner.
        print(f"assign 1-{SHARDS} at epoch {epoch} to {address} failed: {e}", flush=True)


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
        try:
            body = self._body()
        except ValueError as e:
            self._error(400, "BadRequest", str(e))
            return
        print(f"{verb} {json.dumps(body)}", flush=True)
        if verb == "register":
            with LOCK:
                STATE["pods"] = [p for p in STATE["pods"] if p["name"] != body["pod"]]
                STATE["pods"].append({"name": body["pod"], "uid": body["uid"],
                                      "address": body["address"],
                                      "version": body.get("version", ""),
                                      "incarnation": body.get("incarnation", "")})
                STATE["epoch"] += 1
                epoch = STATE["epoch"]
                if body["pod"] == OWNER:
                    STATE["assignments"] = [{"pod": OWNER, "epoch": epoch,
                                             "shards": f"1-{SHARDS}"}]
            self._send(200, {"epoch": epoch})
            if body["pod"] == OWNER:
                threading.Thread(target=assign_all, args=(body, epoch)).start()
        elif verb == "unregister":
            with LOCK:
                STATE["pods"] = [p for p in STATE["pods"] if p["name"] != body["pod"]]
                STATE["assignments"] = [a for a in STATE["assignments"] if a["pod"] != body["pod"]]
                STATE["epoch"] += 1
                epoch = STATE["epoch"]
            self._send(200, {"epoch": epoch})
        elif verb == "renew":
            # The ownership lease: confirmed for the registered process of a listed pod.
            with LOCK:
                known = any(p["name"] == body.get("pod") and p["uid"] == body.get("uid") and
                            p["incarnation"] == body.get("incarnation") for p in STATE["pods"])
                epoch = STATE["epoch"]
            if known:
                self._send(200, {"epoch": epoch})
            else:
                self._error(404, "PodNotAlive", "not registered: " + json.dumps(body))
        elif verb == "notify-unhealthy":
            self._send(202, {"accepted": True})
        else:
            self._error(404, "NotFound", self.path)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
