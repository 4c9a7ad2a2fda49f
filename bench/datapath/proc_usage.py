#!/usr/bin/env python3
"""CPU time and context switches used so far by some processes and their children.

Prints "CPU_SECONDS CONTEXT_SWITCHES USER_SECONDS" summed over the given PIDs, their direct
children (nginx's workers) and all their threads; CPU is user and system time together. run.sh takes one reading before and one after a measurement and
divides the difference by the requests served, to show what each hop costs.

Usage: proc_usage.py PID...
"""
import os
import sys

pids = set(sys.argv[1:])
for p in list(pids):
    try:
        with open(f"/proc/{p}/task/{p}/children") as f:
            pids.update(f.read().split())
    except OSError:
        pass
ticks = 0
user_ticks = 0
switches = 0
for p in pids:
    try:
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
        user_ticks += int(fields[11])
        for t in os.listdir(f"/proc/{p}/task"):
            with open(f"/proc/{p}/task/{t}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
    except (OSError, ValueError):
        pass  # a process or thread that ended in between
hz = os.sysconf("SC_CLK_TCK")
print(f"{ticks / hz:.2f} {switches} {user_ticks / hz:.2f}")
