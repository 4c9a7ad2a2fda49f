#!/usr/bin/env python3
"""A stand-in for kshard-operator's manager API for one ShardMap, enough for sidecars under test.

Serves, for ShardMap NAMESPACE/NAME, what kshard-sidecar --map-source=manager calls:
POST /v1/shardmaps/{ns}/{name}/register|unregister|renew|notify-unhealthy and GET .../assignments,
like the stub operator of tests/sidecar/sidecar_component_test.cc. Every pod that registers is
listed in the map. The pod that takes the shards (--owner POD; without it, every pod as it
registers) makes the map be persisted at a new epoch with all SHARDS shards on it (write-ahead, as
the operator does), and only then are they assigned on its peer API, addressed to the registered
process (the sidecar refuses a command for another). Every other pod holds nothing. A renew (the
ownership lease) is confirmed for the registered process (pod, uid, incarnation) of a listed pod.

Prints one line per control call on stdout, which the callers keep as a log.

Used by bench/datapath (run.sh, drain.sh, instructions.sh: --owner, and a long entity idle
timeout so that no entity is stopped while a benchmark runs) and e2e/schemathesis/run.sh (one
sidecar, short timeouts).

Usage: stub_manager.py PORT NAMESPACE NAME SHARDS [--owner POD] [--token-file FILE]
           [--send-timeout D] [--handoff-timeout D] [--entity-idle-timeout D] [--ping-timeout D]
With --token-file, the assign call carries the file's content as a bearer token (the operator's
token, for sidecars with --peer-auth=token).
"""
import argparse
import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="A stub of kshard-operator's manager API.")
    p.add_argument("port", type=int)
    p.add_argument("namespace")
    p.add_argument("name")
    p.add_argument("shards", type=int)
    p.add_argument("--owner", help="the one pod that takes every shard (default: each pod as it registers)")
    p.add_argument("--token-file", help="bearer token for the assign calls")
    p.add_argument("--send-timeout", default="10s")
    p.add_argument("--handoff-timeout", default="30s")
    p.add_argument("--entity-idle-timeout", default="1h")
    p.add_argument("--ping-timeout", default="3s")
    return p.parse_args(argv)


class StubManager:
    def __init__(self, args):
        self.args = args
        self.token = open(args.token_file).read().strip() if args.token_file else ""
        self.base = f"/v1/shardmaps/{args.namespace}/{args.name}/"
        self.all_shards = f"1-{args.shards}"
        self.lock = threading.Lock()
        self.epoch = 0
        self.pods = []
        self.assignments = []

    def shard_map(self):
        a = self.args
        with self.lock:
            pods = [dict(p) for p in self.pods]
            assignments = [dict(x) for x in self.assignments]
            epoch = self.epoch
        assigned = {x["pod"] for x in assignments}
        for p in pods:
            p["shards"] = a.shards if p["name"] in assigned else 0
        return {
            "apiVersion": "kshard.io/v1alpha1",
            "kind": "ShardMap",
            "metadata": {"name": a.name, "namespace": a.namespace, "uid": "stub", "generation": 1},
            "spec": {"shards": a.shards, "sendTimeout": a.send_timeout,
                     "handoffTimeout": a.handoff_timeout,
                     "entityIdleTimeout": a.entity_idle_timeout, "pingTimeout": a.ping_timeout},
            "status": {
                "observedGeneration": 1,
                "epoch": epoch,
                "manager": {"pod": "stub-manager", "address": f"127.0.0.1:{a.port}"},
                "pods": pods,
                "assignments": assignments,
                "unassigned": "" if assignments else self.all_shards,
                "podCount": len(pods),
                "unassignedCount": 0 if assignments else a.shards,
                "conditions": [],
            },
        }

    def register(self, body):
        """Lists the pod; returns the new epoch, and the pod when it takes every shard (the
        caller assigns them with assign_all once it has answered the register)."""
        pod = {"name": body["pod"], "uid": body["uid"], "address": body["address"],
               "version": body.get("version", ""), "incarnation": body.get("incarnation", "")}
        takes = self.args.owner is None or pod["name"] == self.args.owner
        with self.lock:
            self.pods = [p for p in self.pods if p["name"] != pod["name"]] + [pod]
            self.epoch += 1
            epoch = self.epoch
            if takes:
                self.assignments = [{"pod": pod["name"], "epoch": epoch, "shards": self.all_shards}]
        return epoch, (pod if takes else None)

    def unregister(self, body):
        with self.lock:
            self.pods = [p for p in self.pods if p["name"] != body["pod"]]
            self.assignments = [x for x in self.assignments if x["pod"] != body["pod"]]
            self.epoch += 1
            return self.epoch

    def renew(self, body):
        """The epoch when the body names the registered process of a listed pod, else None."""
        with self.lock:
            known = any(p["name"] == body.get("pod") and p["uid"] == body.get("uid") and
                        p["incarnation"] == body.get("incarnation") for p in self.pods)
            return self.epoch if known else None

    def assign_all(self, pod, epoch):
        a = self.args
        address = pod["address"]
        # Addressed to the registered process: the sidecar refuses a command for another.
        body = json.dumps({"shardMap": f"{a.namespace}/{a.name}", "epoch": epoch,
                           "pod": pod["name"], "uid": pod["uid"],
                           "incarnation": pod["incarnation"],
                           "shards": self.all_shards}).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(f"http://{address}/v1/shards/assign", data=body,
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                print(f"assign {self.all_shards} at epoch {epoch} to {address}: {r.status}", flush=True)
        except OSError as e:
            # The sidecar also takes the shards from the polled map; this only makes it sooner.
            print(f"assign {self.all_shards} at epoch {epoch} to {address} failed: {e}", flush=True)


def handler_for(stub):
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
            if self.path == stub.base + "assignments":
                self._send(200, stub.shard_map())
            else:
                self._error(404, "NotFound", self.path)

        def do_POST(self):
            if not self.path.startswith(stub.base):
                self._error(404, "NotFound", self.path)
                return
            verb = self.path[len(stub.base):]
            try:
                body = self._body()
            except ValueError as e:
                self._error(400, "BadRequest", str(e))
                return
            print(f"{verb} {json.dumps(body)}", flush=True)
            if verb == "register":
                epoch, owner = stub.register(body)
                self._send(200, {"epoch": epoch})
                if owner is not None:
                    threading.Thread(target=stub.assign_all, args=(owner, epoch)).start()
            elif verb == "unregister":
                self._send(200, {"epoch": stub.unregister(body)})
            elif verb == "renew":
                epoch = stub.renew(body)
                if epoch is not None:
                    self._send(200, {"epoch": epoch})
                else:
                    self._error(404, "PodNotAlive", "not registered: " + json.dumps(body))
            elif verb == "notify-unhealthy":
                self._send(202, {"accepted": True})
            else:
                self._error(404, "NotFound", self.path)

        def log_message(self, *args):
            pass

    return Handler


def main(argv=None):
    args = parse_args(argv)
    ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(StubManager(args))).serve_forever()


if __name__ == "__main__":
    main()
