#!/usr/bin/python3
"""The checker's own tests: each kind of anomaly, written into a small
history and final state, is found; a clean history has none; a second
two-phase execution inside a crash window is counted, not reported."""
import json
import os
import sys

sys.dont_write_bytecode = True  # nothing left in the source tree
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402


def op(w, key, variant=0, status=201, answer=None, t0=10.0, code=None,
       body=None, error=None):
    from workload import request_for
    path, b = request_for(w, key, variant)
    r = {"op": w, "key": key, "variant": variant, "path": path,
         "body": body or json.dumps(b, sort_keys=True), "t0": t0,
         "t1": t0 + 0.1, "phase": "load"}
    if error:
        r["error"] = error
        return r
    r["status"] = status
    r["answer"] = answer if answer is not None else "{}"
    if code:
        r["code"] = code
    return r


def state(**kw):
    s = {"ledger": {}, "tx": {}, "echo": {}, "sleep": {}, "charges": {}, "payments": {},
         "records": {}, "unresolved": []}
    s.update(kw)
    return s


def kinds(ops, st, events=()):
    return sorted(a["kind"] for a in check.check(ops, list(events), st)[0])


class Checker(unittest.TestCase):
    def test_clean_history(self):
        from workload import request_for
        amt = request_for("ledger", "k", 0)[1]["amount"]
        a = json.dumps({"account": "a-k", "balance": amt})
        ops = [op("ledger", "k", answer=a), op("ledger", "k", answer=a),
               op("ledger", "k", 3, 409, code="IDEMPOTENCY_CONFLICT"),
               op("tx", "t", answer='{"exec": "e1"}'),
               op("tx", "t", error="timeout"),
               op("echo", "e", answer='{"echo": {"n": 0}, "exec": "x"}')]
        st = state(ledger={"a-k": amt}, tx={"t": ["e1"]}, echo={"e": ["x"]})
        self.assertEqual(kinds(ops, st), [])

    def test_ok_without_effect(self):
        ops = [op("tx", "t", answer='{"exec": "e1"}')]
        self.assertEqual(kinds(ops, state()), ["ok_without_effect"])
        # an answer naming an execution that never happened
        self.assertEqual(kinds(ops, state(tx={"t": ["e2"]})),
                         ["ok_without_effect"])

    def test_two_answers(self):
        ops = [op("tx", "t", answer='{"exec": "e1"}'),
               op("tx", "t", answer='{"exec": "e2"}')]
        self.assertIn("two_answers",
                      kinds(ops, state(tx={"t": ["e1", "e2"]})))

    def test_false_conflict(self):
        ops = [op("tx", "t", answer='{"exec": "e1"}'),
               op("tx", "t", 0, 409, code="IDEMPOTENCY_CONFLICT")]
        self.assertEqual(kinds(ops, state(tx={"t": ["e1"]})),
                         ["false_conflict"])

    def test_answer_of_another(self):
        ops = [op("echo", "e", answer='{"echo": {"n": 7}, "exec": "x"}')]
        self.assertEqual(kinds(ops, state(echo={"e": ["x"]})),
                         ["answer_of_another"])

    def test_ledger_balance_of_a_second_deposit(self):
        from workload import request_for
        amt = request_for("ledger", "k", 0)[1]["amount"]
        a = json.dumps({"account": "a-k", "balance": 2 * amt})
        self.assertEqual(kinds([op("ledger", "k", answer=a)],
                               state(ledger={"a-k": amt})),
                         ["answer_of_another"])

    def test_executed_twice_transactional(self):
        ops = [op("tx", "t", error="timeout")]
        self.assertEqual(kinds(ops, state(tx={"t": ["e1", "e2"]})),
                         ["executed_twice"])
        from workload import request_for
        amt = request_for("ledger", "k", 0)[1]["amount"]
        ops = [op("ledger", "k", error="timeout")]
        self.assertEqual(kinds(ops, state(ledger={"a-k": 2 * amt})),
                         ["executed_twice"])
        self.assertEqual(kinds([op("payments", "p", error="reset")],
                               state(charges={"p-p": ["ch_1", "ch_2"]})),
                         ["executed_twice"])

    def test_two_phase_second_in_a_window(self):
        ops = [op("echo", "e", error="timeout", t0=10.0)]
        st = state(echo={"e": ["x", "y"]})
        self.assertEqual(kinds(ops, st), ["unexplained_second"])
        ev = [{"event": "apply", "nemesis": "kill-worker i1", "t": 9.0},
              {"event": "heal", "nemesis": "kill-worker i1", "t": 12.0}]
        self.assertEqual(kinds(ops, st, ev), [])
        self.assertEqual(check.check(ops, ev, st)[1]["windowed_second"], 1)
        # a partition from the web server frees no lease, nor does a
        # skewed clock (leases are the database's)
        for n in ("partition-inst-web i1", "skew-inst i1 600"):
            ev = [{"event": "apply", "nemesis": n, "t": 9.0},
                  {"event": "heal", "nemesis": n, "t": 12.0}]
            self.assertEqual(kinds(ops, st, ev), ["unexplained_second"])

    def test_galera_conflict_charge_is_g7_anomaly(self):
        ops = [op("payments", "p", answer='{"charge": "ch_1"}'),
               op("payments", "p", 5, 409, code="IDEMPOTENCY_CONFLICT")]
        st = state(charges={"p-p": ["ch_1", "ch_2"]},
                   charge_amounts={"p-p": [100, 105]})
        # one MariaDB has no such window: the conflicting request waits
        self.assertEqual(kinds(ops, st), ["executed_twice"])
        # on Galera, window G7: closed (the payments route calls
        # outside, its key reserved first), so an anomaly of its own
        st["topology"] = "galera"
        self.assertEqual(kinds(ops, st), ["g7_charge"])
        self.assertEqual(check.check(ops, [], st)[1]["g7_charges"], 1)
        # the winning body charged twice is no such window
        st["charge_amounts"] = {"p-p": [100, 100]}
        self.assertEqual(kinds(ops, st), ["executed_twice"])
        # nor a charge of a body that was never told a conflict
        st["charge_amounts"] = {"p-p": [100, 107]}
        self.assertEqual(kinds(ops, st), ["executed_twice"])

    def test_unresolved(self):
        ops = [op("tx", "t", error="timeout")]
        self.assertEqual(kinds(ops, state(unresolved=["t"])),
                         ["unresolved"])

    def test_unavailability(self):
        ops = [op("tx", "a", t0=5.0), op("tx", "b", t0=12.5),
               op("tx", "c", t0=13.0, status=503)]
        self.assertEqual(check.unavailability(ops, [10.0]), [2.5])


if __name__ == "__main__":
    unittest.main()
