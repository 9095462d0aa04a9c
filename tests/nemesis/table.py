#!/usr/bin/python3
"""table.py DIR: the table of docs/reliability.md from the runs kept under
DIR (run --keep DIR), checked again with check.py: for each topology and
nemesis, the runs it was applied in and how often, the operations of each
workload sent while it was on, the anomalies among keys sent while it was
on, the second executions on the two-phase routes inside its windows (at
least once 1-3, allowed) and the keys with a charge of window G7 (also
anomalies).  The row "none"
counts what was sent while no fault was on."""
import collections
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402
from workload import TWO_PHASE, WORKLOADS  # noqa: E402


def g7_keys(rs_by_key, state):
    """The payments keys with a charge of window G7 (an anomaly)."""
    out = set()
    for (w, key), rs in rs_by_key.items():
        if w != "payments":
            continue
        found, _ = check.check(rs, [], state)
        if any(a["kind"] == "g7_charge" for a in found):
            out.add(key)
    return out


def main(argv):
    root = argv[1]
    runs = collections.defaultdict(set)
    applied = collections.Counter()
    ops_in = collections.Counter()
    anom = collections.Counter()
    second = collections.Counter()
    g7 = collections.Counter()
    totals = collections.Counter()
    nruns = collections.Counter()
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.exists(os.path.join(d, "state.json")):
            continue
        ops, events, state = check.load(d)
        topo = state.get("topology") or json.load(
            open(os.path.join(d, "result.json")))["topology"]
        nruns[topo] += 1
        wins = check.windows_of(events)
        bad = {(a["workload"], a["key"])
               for a in check.check(ops, events, state)[0]}
        by_key = collections.defaultdict(list)
        for r in ops:
            by_key[(r["op"], r["key"])].append(r)
        g7k = g7_keys(by_key, state)
        for s, e, k in wins:
            runs[(topo, k)].add(name)
            applied[(topo, k)] += 1
        for (w, key), rs in by_key.items():
            kinds = set()
            for r in rs:
                totals[(topo, w)] += 1
                on = {k for s, e, k in wins if r["t0"] <= e and r["t1"] >= s}
                for k in on or {"none"}:
                    ops_in[(topo, k, w)] += 1
                kinds |= on or {"none"}
            for k in kinds:
                runs[(topo, k)].add(name)
                if (w, key) in bad:
                    anom[(topo, k)] += 1
                if w in TWO_PHASE:
                    second[(topo, k)] += max(
                        0, len(state[w].get(key, [])) - 1)
                if key in g7k:
                    g7[(topo, k)] += 1
    print("| topology | nemesis | runs | applied | %s | anomalies | second "
          "two-phase executions (allowed) | G7 charges |" %
          " | ".join(WORKLOADS))
    print("| --- | --- | --- | --- | %s | --- | --- | --- |" %
          " | ".join("---" for _ in WORKLOADS))
    for topo, k in sorted(runs, key=lambda x: (x[0], x[1] == "none", x[1])):
        print("| %s | %s | %d | %s | %s | %d | %d | %d |" % (
            topo, k, len(runs[(topo, k)]),
            applied[(topo, k)] if k != "none" else "-",
            " | ".join(str(ops_in[(topo, k, w)]) for w in WORKLOADS),
            anom[(topo, k)], second[(topo, k)], g7[(topo, k)]))
    for topo in sorted(nruns):
        print("\n%s: %d runs, operations: %s" % (
            topo, nruns[topo], ", ".join("%s %d" % (w, totals[(topo, w)])
                                         for w in WORKLOADS)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
