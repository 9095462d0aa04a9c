#!/usr/bin/python3
"""The checker: reads a run's history (history.jsonl) and the final state
of its databases and services (state.json), and reports every anomaly by
kind.  `check.py DIR` checks a kept run again.

For every key, its executions (the side effects: the ledger balance, the
rows of testkit_effects, the lines of the testkit log, the provider's
charges) are set against the answers its clients were told:
  ok_without_effect     a 2xx for a request whose effect never happened
                        (or naming an execution that never happened)
  two_answers           two different 2xx answers for one key
  answer_of_another     a 2xx telling of another request's body
  false_conflict        IDEMPOTENCY_CONFLICT for the key's winning request
  executed_twice        more than one execution on a transactional or
                        recovery-point route (or a provider charge twice)
  unexplained_second    a second execution on the two-phase route that no
                        crash window (kill, pause, partition from the
                        store, loss, a slow link) overlaps; a skewed
                        clock is no such window
  unresolved            a key with no final answer after the heal
  g7_charge             on Galera, a provider charge of a request that
                        was told a conflict (or an unknown outcome) and
                        lost its key to another body reserved through
                        another node at the same time: window G7 of
                        reliability.md, closed by reserving first on
                        routes that call outside (also counted,
                        g7_charges)
A second execution on the two-phase route inside such a window is counted
(windowed_second), not an anomaly: reliability.md, at least once 1-3.
Answers never received (timeouts, resets, the web server's own 5xx) are
unknown: possibly executed, never held against the service.
"""
import collections
import json
import os
import sys

sys.dont_write_bytecode = True  # nothing left in the source tree

from nemeses import CRASH_WINDOWS
from workload import TWO_PHASE


def load(d):
    ops, events = [], []
    with open(os.path.join(d, "history.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            (ops if "op" in rec else events).append(rec)
    with open(os.path.join(d, "state.json")) as f:
        state = json.load(f)
    return ops, events, state


def windows_of(events):
    """(start, end, kind) of every nemesis, from its apply and heal."""
    open_, out = {}, []
    for e in events:
        if e["event"] == "apply":
            open_[e["nemesis"]] = e["t"]
        elif e["event"] == "heal" and e["nemesis"] in open_:
            out.append((open_.pop(e["nemesis"]), e["t"],
                        e["nemesis"].split()[0]))
    return out


def ok(r):
    return 200 <= r.get("status", 0) < 300


def executions(w, key, amount0, state):
    """The executions of key: (count, ids of executions or None, extra)
    where extra is the count of executions of a conflicting body."""
    if w == "ledger":
        bal = state["ledger"].get("a-" + key, 0)
        first, other = bal % 100, bal // 100
        # other bodies deposit multiples of 100; the first 1..9 each time
        n = first // amount0 if amount0 else 0
        return n + (1 if other else 0), None, other, first % amount0 != 0
    if w == "tx":
        ex = state["tx"].get(key, [])
        return len(ex), set(ex), 0, False
    if w in TWO_PHASE:
        ex = state[w].get(key, [])
        return len(ex), set(ex), 0, False
    ch = state["charges"].get("p-" + key, [])
    return len(ch), set(ch), 0, False


def check(ops, events, state):
    """Returns (anomalies: list of dicts, counts: dict)."""
    wins = windows_of(events)
    by_key = collections.defaultdict(list)
    for r in ops:
        by_key[(r["op"], r["key"])].append(r)
    anomalies, counts = [], collections.Counter()
    unresolved = set(state.get("unresolved", []))

    def bad(kind, w, key, why):
        anomalies.append({"kind": kind, "workload": w, "key": key,
                          "why": why})

    for (w, key), rs in sorted(by_key.items()):
        counts["keys"] += 1
        first = [r for r in rs if r["variant"] == 0]
        amount0 = json.loads(first[0]["body"]).get("amount") if first and \
            w == "ledger" else None
        n, ids, other, stray = executions(w, key, amount0, state)
        oks = [r for r in rs if ok(r)]
        bodies = {r["body"] for r in rs}
        won = {r["body"] for r in oks}
        if key in unresolved:
            bad("unresolved", w, key, "no final answer after the heal")
        if stray:
            bad("ok_without_effect", w, key, "balance %d is no sum of the "
                "deposits sent" % state["ledger"].get("a-" + key, 0))
        if oks and n == 0:
            bad("ok_without_effect", w, key, "%d answers 2xx, no effect" %
                len(oks))
        answers = {(r["status"], r["answer"]) for r in oks}
        if len(answers) > 1:
            bad("two_answers", w, key, "%d different 2xx answers" %
                len(answers))
        if len(won) > 1:
            bad("answer_of_another", w, key, "2xx for %d bodies" % len(won))
        for r in oks:
            try:
                a = json.loads(r["answer"])
            except ValueError:
                continue
            exec_id = a.get("exec") or a.get("charge")
            if ids and exec_id is not None and \
                    exec_id not in ids:
                bad("ok_without_effect", w, key, "answer names %s, never "
                    "executed" % exec_id)
            if w == "echo" and json.dumps(a.get("echo"), sort_keys=True) \
                    != r["body"]:
                bad("answer_of_another", w, key, "echo %s for body %s" %
                    (a.get("echo"), r["body"]))
            if w == "ledger" and a.get("account") != "a-" + key:
                bad("answer_of_another", w, key, "account %s" %
                    a.get("account"))
            # each key deposits into an account of its own, once: the
            # answer's balance is the amount of the request that won
            if w == "ledger" and a.get("balance") != \
                    json.loads(r["body"]).get("amount"):
                bad("answer_of_another", w, key, "balance %s after a "
                    "deposit of %s into a fresh account" %
                    (a.get("balance"), json.loads(r["body"]).get("amount")))
        winner = won.pop() if len(won) == 1 else (
            next(iter(bodies)) if len(bodies) == 1 else None)
        for r in rs:
            if r.get("code") == "IDEMPOTENCY_CONFLICT" and winner is not \
                    None and r["body"] == winner:
                bad("false_conflict", w, key, "conflict for the winning "
                    "request at %.3f" % r["t0"])
        if w == "ledger" and other and n - 1 > 0:
            bad("executed_twice", w, key, "both bodies deposited")
        counts["executions"] += n
        if n > 1 and w == "payments" and state.get("topology") == \
                "galera" and state.get("payments_tx", True):
            # G7 (reliability.md): a request with another body, reserved
            # through another node at the same time, ran its handler (the
            # charge, outside the database) before its transaction lost
            # certification; then it was told a conflict.  Closed (the
            # route calls outside: its key is reserved first): an anomaly.
            amounts = state.get("charge_amounts", {}).get("p-" + key, [])
            mine = [json.loads(winner)["amount"]] if winner else []
            lost = {json.loads(r["body"])["amount"] for r in rs
                    if r.get("code") in ("IDEMPOTENCY_CONFLICT",
                                         "IDEMPOTENCY_OUTCOME_UNKNOWN")}
            extra = [a for a in amounts if a not in mine]
            if extra and all(a in lost for a in extra) and \
                    len(amounts) - len(extra) <= 1:
                counts["g7_charges"] += len(extra)
                bad("g7_charge", w, key, "%d charge(s) of %s, told a "
                    "conflict or an unknown outcome" % (len(extra), extra))
                n = len(amounts) - len(extra)
        if n > 1:
            if w not in TWO_PHASE:
                bad("executed_twice", w, key, "%d executions" % n)
            else:
                t0 = min(r["t0"] for r in rs)
                t1 = max(r["t1"] for r in rs)
                hit = [k for s, e, k in wins if s <= t1 and e >= t0 and
                       k in CRASH_WINDOWS]
                if hit:
                    counts["windowed_second"] += n - 1
                else:
                    bad("unexplained_second", w, key, "%d executions, no "
                        "crash window" % n)
        for r in rs:
            if "error" in r or (r["status"] >= 500 and not r.get("code")):
                # no answer, or the web server's own: may have run
                counts["unknown"] += 1
            elif ok(r):
                counts["2xx"] += 1
            else:
                counts[str(r["status"]) + " " + str(r.get("code"))] += 1
    counts["operations"] = len(ops)
    return anomalies, counts


def unavailability(ops, heals):
    """Seconds from each heal to the first 2xx of a request sent after it."""
    oks = sorted(r["t0"] for r in ops if ok(r))
    out, j = [], 0
    for h in sorted(heals):
        while j < len(oks) and oks[j] < h:
            j += 1
        if j < len(oks):
            out.append(oks[j] - h)
    return out


def recovery(ops, events):
    """Seconds from each heal to the first 2xx answer of each key a fault
    touched (sent while it was on, with no 2xx before the heal): how long
    the clients it caught waited for a correct answer."""
    by_key = collections.defaultdict(list)
    for r in ops:
        by_key[(r["op"], r["key"])].append(r)
    out = []
    for s, e, k in windows_of(events):
        for rs in by_key.values():
            if not any(r["t0"] <= e and r["t1"] >= s for r in rs):
                continue
            if any(ok(r) and r["t1"] < e for r in rs):
                continue
            after = [r["t1"] for r in rs if ok(r) and r["t1"] >= e]
            if after:
                out.append(min(after) - e)
    return out


def main(argv):
    d = argv[1]
    ops, events, state = load(d)
    anomalies, counts = check(ops, events, state)
    for a in anomalies:
        print("%(kind)s %(workload)s %(key)s: %(why)s" % a)
    print(json.dumps(counts, sort_keys=True))
    print("%d anomalies" % len(anomalies))
    return 1 if anomalies else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
