#!/usr/bin/env python3
"""Prints COUNT TCP ports, space-separated, that were free a moment ago on HOST (127.0.0.1).

    free_ports.py COUNT [HOST]

The ports lie below the kernel's range for outgoing connections' local ports: a port that bind(0)
hands out is one the kernel may give the next outgoing connection of any process before the
server under test binds it ("Address already in use"). With FREE_PORTS_STATE naming a file, ports
listed there are skipped and the new ones are appended, so that a script calling this many times
never gets the same port twice.
"""
import os
import random
import socket
import sys


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(host, port):
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def main():
    if len(sys.argv) not in (2, 3) or not sys.argv[1].isdigit():
        sys.exit("usage: free_ports.py COUNT [HOST]")
    count, host = int(sys.argv[1]), sys.argv[2] if len(sys.argv) == 3 else "127.0.0.1"
    state = os.environ.get("FREE_PORTS_STATE")
    given = set()
    if state and os.path.exists(state):
        with open(state) as f:
            given = {int(p) for p in f.read().split()}
    low, high = 15000, ephemeral_low() - 1
    candidates = list(range(low, high + 1)) if high - low >= 1000 else []
    random.shuffle(candidates)
    out = []
    for port in candidates:
        if len(out) == count:
            break
        if port not in given and bindable(host, port):
            out.append(port)
    while len(out) < count:  # no room below the ephemeral range: let the kernel choose
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in given and port not in out:
            out.append(port)
    if state:
        with open(state, "a") as f:
            f.write(" ".join(map(str, out)) + "\n")
    print(" ".join(map(str, out)))


if __name__ == "__main__":
    main()
