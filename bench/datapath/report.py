#!/usr/bin/env python3
"""The tables of the data-path benchmark, from the points run.sh measured.

Input: one line per point,
  wrk ROUND TOPOLOGY CONNECTIONS REQUESTS_PER_S ERRORS PROXY_CPU_US PROXY_SWITCHES APP_CPU_US [PROXY_USER_US]
  fortio ROUND TOPOLOGY P50_MS P90_MS P99_MS REQUESTS_PER_S ERRORS PROXY_CPU_US PROXY_SWITCHES
  fortio-uniform ... (the same, with the connections' requests spread evenly: fortio -uniform)
with TOPOLOGY one of direct, nginx, sidecar, owner (one sidecar, which owns the entity; not a
topology of the issue, it splits the sidecar pair's cost). The figures per request are the CPU time of the two
proxies together (and, from wrk, the part of it in user space), their context switches, and (wrk)
the app's CPU time.

A round's peak for a topology is its best wrk point over the connection counts; the tables show
the median over the rounds, the goals of issue 6 checked against the medians, and every point.

Usage: report.py POINTS_FILE
"""
import statistics
import sys

LABELS = {
    "direct": "(a) load generator → app",
    "nginx": "(b) → nginx → nginx → app",
    "sidecar": "(c) → sidecar A → sidecar B → app",
    "owner": "for reference: → sidecar B (owner) → app",
    "sidecar-auth": "(c) with --peer-auth=token: → sidecar C → sidecar D → app",
    "sidecar-http": "(c) with --peer-transport=http: → sidecar E → sidecar F → app",
}
GOAL_P50_MS, GOAL_P99_MS = 0.5, 2.0

wrk, fortio, uniform = [], [], []
with open(sys.argv[1]) as f:
    for line in f:
        kind, *v = line.split()
        if kind == "wrk":
            wrk.append({"round": int(v[0]), "topology": v[1], "connections": int(v[2]),
                        "rps": float(v[3]), "errors": int(v[4]), "proxy_cpu": float(v[5]),
                        "proxy_switches": float(v[6]), "app_cpu": float(v[7]),
                        "proxy_user": float(v[8]) if len(v) > 8 else float("nan")})
        elif kind in ("fortio", "fortio-uniform"):
            (fortio if kind == "fortio" else uniform).append({"round": int(v[0]), "topology": v[1], "p50": float(v[2]),
                           "p90": float(v[3]), "p99": float(v[4]), "rps": float(v[5]),
                           "errors": int(v[6]), "proxy_cpu": float(v[7]),
                           "proxy_switches": float(v[8])})

rounds = sorted({x["round"] for x in wrk + fortio})


def peaks(topology):
    """The best wrk point of each round."""
    out = []
    for r in rounds:
        points = [x for x in wrk if x["topology"] == topology and x["round"] == r]
        if points:
            out.append(max(points, key=lambda x: x["rps"]))
    return out


def median_peak(topology, key="rps"):
    return statistics.median(x[key] for x in peaks(topology))


def med(topology, key, points=None):
    return statistics.median(x[key] for x in (fortio if points is None else points)
                             if x["topology"] == topology)


def errors(topology):
    return sum(x["errors"] for x in wrk + fortio if x["topology"] == topology)


connections = sorted({x["connections"] for x in wrk})
print(f"Medians of {len(rounds)} round(s). Peak: the best of wrk at "
      f"{', '.join(map(str, connections))} connections. Latency: fortio at a fixed rate; "
      "added = over (a).")
print()
print("| topology | peak requests/s | at connections | p50 ms | p90 ms | p99 ms | added p50 ms "
      "| added p99 ms | errors |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for t, label in LABELS.items():
    added50 = "" if t == "direct" else f"{med(t, 'p50') - med('direct', 'p50'):+.3f}"
    added99 = "" if t == "direct" else f"{med(t, 'p99') - med('direct', 'p99'):+.3f}"
    at = "/".join(str(c) for c in sorted({x["connections"] for x in peaks(t)}))
    print(f"| {label} | {median_peak(t):,.0f} | {at} | {med(t, 'p50'):.3f} | {med(t, 'p90'):.3f} "
          f"| {med(t, 'p99'):.3f} | {added50} | {added99} | {errors(t)} |")
print()

c, b = median_peak("sidecar"), median_peak("nginx")
a50 = med("sidecar", "p50") - med("direct", "p50")
a99 = med("sidecar", "p99") - med("direct", "p99")


def verdict(ok):
    return "met" if ok else "**not met**"


print("Goals (issue 6):")
print()
print(f"- (c) peak ≥ (b) peak: {c:,.0f} vs {b:,.0f} requests/s, {c / b:.2f}×: {verdict(c >= b)}")
print(f"- added p50 ≤ {GOAL_P50_MS} ms: {a50:+.3f} ms: {verdict(a50 <= GOAL_P50_MS)}")
print(f"- added p99 ≤ {GOAL_P99_MS:.0f} ms: {a99:+.3f} ms: {verdict(a99 <= GOAL_P99_MS)}")
if uniform:
    u50 = med("sidecar", "p50", uniform) - med("direct", "p50", uniform)
    u99 = med("sidecar", "p99", uniform) - med("direct", "p99", uniform)
    print(f"- the same latency goals with the requests spread evenly (fortio -uniform): added p50 "
          f"{u50:+.3f} ms, {verdict(u50 <= GOAL_P50_MS)}; added p99 {u99:+.3f} ms, "
          f"{verdict(u99 <= GOAL_P99_MS)}")
print()
if uniform:
    print("Latency with the connections' requests spread evenly over time (fortio -uniform; above, "
          "fortio's default, all connections send together):")
    print()
    print("| topology | p50 ms | p90 ms | p99 ms | added p50 ms | added p99 ms "
          "| proxies' CPU µs / request | context switches / request |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t, label in LABELS.items():
        if not any(x["topology"] == t for x in uniform):
            continue
        added50 = "" if t == "direct" else \
            f"{med(t, 'p50', uniform) - med('direct', 'p50', uniform):+.3f}"
        added99 = "" if t == "direct" else \
            f"{med(t, 'p99', uniform) - med('direct', 'p99', uniform):+.3f}"
        cost = "– | –" if t == "direct" else \
            f"{med(t, 'proxy_cpu', uniform):.1f} | {med(t, 'proxy_switches', uniform):.2f}"
        print(f"| {label} | {med(t, 'p50', uniform):.3f} | {med(t, 'p90', uniform):.3f} "
              f"| {med(t, 'p99', uniform):.3f} | {added50} | {added99} | {cost} |")
    print()
print("What one request costs (medians): CPU time of the proxies together and their context")
print(f"switches, at each topology's peak (wrk) and at {statistics.median(x['rps'] for x in fortio):,.0f} "
      "requests/s (fortio); the app's CPU time at the peak.")
print()
print("| topology | proxies' CPU µs / request, peak | of which user | context switches / request, peak "
      "| app CPU µs / request, peak | proxies' CPU µs / request, fixed rate "
      "| context switches / request, fixed rate |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for t, label in LABELS.items():
    if t == "direct":
        print(f"| {label} | – | – | – | {median_peak(t, 'app_cpu'):.1f} | – | – |")
        continue
    print(f"| {label} | {median_peak(t, 'proxy_cpu'):.1f} | {median_peak(t, 'proxy_user'):.1f} "
          f"| {median_peak(t, 'proxy_switches'):.2f} "
          f"| {median_peak(t, 'app_cpu'):.1f} | {med(t, 'proxy_cpu'):.1f} "
          f"| {med(t, 'proxy_switches'):.2f} |")
print()
print("Every wrk point:")
print()
print("| round | topology | connections | requests/s | errors | proxies' CPU µs / req "
      "| of which user | switches / req | app CPU µs / req |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for x in wrk:
    print(f"| {x['round']} | {x['topology']} | {x['connections']} | {x['rps']:,.0f} | {x['errors']} "
          f"| {x['proxy_cpu']:.1f} | {x['proxy_user']:.1f} | {x['proxy_switches']:.2f} "
          f"| {x['app_cpu']:.1f} |")
print()
print("Every fortio point:")
print()
print("| round | topology | pacing | p50 ms | p90 ms | p99 ms | requests/s | errors "
      "| proxies' CPU µs / req | switches / req |")
print("| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for pacing, points in (("together", fortio), ("uniform", uniform)):
    for x in points:
        print(f"| {x['round']} | {x['topology']} | {pacing} | {x['p50']:.3f} | {x['p90']:.3f} "
              f"| {x['p99']:.3f} | {x['rps']:,.0f} | {x['errors']} | {x['proxy_cpu']:.1f} "
              f"| {x['proxy_switches']:.2f} |")
