#!/usr/bin/python3
"""table.py DIR: the table of docs/reliability.md from the runs kept under
DIR (run --keep DIR): for each nemesis and workload, the runs it was
applied in, the operations sent while it was on, the anomalies of keys
sent while it was on, and the second executions on the two-phase route
inside its windows (at least once 1-3, allowed)."""
import collections
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402
from workload import TWO_PHASE  # noqa: E402


def main(argv):
    root = argv[1]
    runs = collections.defaultdict(set)
    ops_in = collections.Counter()
    anom = collections.Counter()
    second = collections.Counter()
    total = collections.Counter()
    topo_runs = collections.Counter()
    workloads = set()
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        if not os.path.exists(os.path.join(d, "state.json")):
            continue
        res = json.load(open(os.path.join(d, "result.json")))
        topo = res["topology"]
        topo_runs[topo] += 1
        ops, events, state = check.load(d)
        wins = check.windows_of(events)
        found = check.check(ops, events, state)[0]
        bad = {(a["workload"], a["key"]) for a in found}
        keys_in = collections.defaultdict(set)
        for r in ops:
            workloads.add(r["op"])
            total[(topo, r["op"])] += 1
            for s, e, k in wins:
                if r["t0"] <= e and r["t1"] >= s:
                    ops_in[(topo, k, r["op"])] += 1
                    keys_in[(k, r["op"])].add(r["key"])
        for s, e, k in wins:
            for w in workloads:
                runs[(topo, k, w)].add(name)
        for (k, w), keys in keys_in.items():
            anom[(topo, k, w)] += len({(w, x) for x in keys} & bad)
            if w in TWO_PHASE:
                second[(topo, k, w)] += sum(
                    max(0, len(state[w].get(x, [])) - 1) for x in keys)
    print("| topology | nemesis | workload | runs | operations while on "
          "| anomalies | second executions (two-phase, allowed) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (topo, k, w) in sorted(runs):
        print("| %s | %s | %s | %d | %d | %d | %s |" % (
            topo, k, w, len(runs[(topo, k, w)]), ops_in[(topo, k, w)],
            anom[(topo, k, w)],
            second[(topo, k, w)] if w in TWO_PHASE else "-"))
    for topo in sorted(topo_runs):
        print("%s: %d runs, %s operations" % (
            topo, topo_runs[topo],
            ", ".join("%s %d" % (w, total[(topo, w)])
                      for w in sorted(workloads))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
