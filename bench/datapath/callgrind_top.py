#!/usr/bin/env python3
"""The functions that cost most in a callgrind dump, per message, by their own (self) cost.

    callgrind_top.py DUMP MESSAGES [N]

Prints the total instructions per message, the N (30) functions with the most instructions of
their own per message with their share of the total, and how many calls to malloc and to
operator new each message made. Reads the dump itself rather than using callgrind_annotate,
which attributes every instruction to the thread's entry point (`clone`) in some dumps taken
with `callgrind_control -d`.
"""

import collections
import re
import sys

NAME = re.compile(r"\((\d+)\)(?: (.*))?")


def summarise(path):
    names = {}

    def name(token):
        m = NAME.match(token)
        if m is None:  # an uncompressed name
            return token
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "(" + m.group(1) + ")")

    own = collections.Counter()
    calls = collections.Counter()
    fn = None
    callee = None
    inclusive_line_next = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                fn = name(line[3:])
            elif line.startswith("cfn="):
                callee = name(line[4:])
            elif line.startswith("calls="):
                calls[callee] += int(line[6:].split()[0])
                # The cost line after a call is the callee's inclusive cost, not the caller's own.
                inclusive_line_next = True
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                parts = line.split()
                if len(parts) < 2:
                    continue
                if inclusive_line_next:
                    inclusive_line_next = False
                    continue
                own[fn] += int(parts[1])
    return own, calls


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    dump, messages = argv[1], int(argv[2])
    top = int(argv[3]) if len(argv) > 3 else 30
    if messages <= 0:
        sys.exit("MESSAGES must be positive")
    own, calls = summarise(dump)
    total = sum(own.values())
    if total == 0:
        sys.exit(f"no costs in {dump}")
    print(f"{total / messages:,.0f} instructions per message ({total:,} in {messages:,} messages)")
    print(f"{'per message':>12} {'share':>6}  function")
    for function, cost in own.most_common(top):
        print(f"{cost / messages:12,.0f} {100 * cost / total:5.1f}%  {function}")
    news = sum(n for f, n in calls.items() if f and f.startswith("operator new"))
    print(f"calls per message: malloc {calls.get('malloc', 0) / messages:.1f}, "
          f"operator new {news / messages:.1f}")


if __name__ == "__main__":
    main(sys.argv)
