"""One JSON file per counter in a directory shared by all pods, in the C++ counter's format
({"epoch":E,"value":V}); a save with an epoch older than the stored one is refused
(examples/counter/counter_store.h)."""

import fcntl
import json
import os

import kshard


class Fenced(Exception):
    """The stored epoch is newer: a newer owner has the counter."""


class Store:
    def __init__(self, directory):
        self.dir = directory

    def path(self, ident):
        return os.path.join(self.dir, kshard.path_escape(ident) + ".json")

    def load(self, ident):
        """(value, epoch); (0, 0) when nothing is saved."""
        try:
            with open(self.path(ident), "rb") as f:
                text = f.read()
        except FileNotFoundError:
            return 0, 0
        if not text:
            return 0, 0
        state = json.loads(text)
        return int(state["value"]), int(state["epoch"])

    def save(self, ident, value, epoch):
        """Atomically (a temporary file and a rename, under an exclusive flock); Fenced when the
        stored epoch is newer than `epoch`."""
        path = self.path(ident)
        with open(path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            _, stored = self.load(ident)
            if stored > epoch:
                raise Fenced(f"fenced: stored epoch {stored} is newer than {epoch}")
            with open(path + ".tmp", "w") as f:
                f.write(json.dumps({"epoch": epoch, "value": value}, separators=(",", ":")) + "\n")
            os.rename(path + ".tmp", path)
