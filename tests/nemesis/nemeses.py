"""The faults, each one applied and healed on a Cluster: partitions (nft in
a host's namespace), loss (nft's numgen: a share of the packets dropped at
random), a slow link (tc tbf: a rate limit whose queue delays every packet
behind it; this kernel has no sch_netem), pauses (SIGSTOP/SIGCONT),
clock skew (the instance's libfaketime offset file), kills (SIGKILL, then a
restart at the heal).  A schedule from a seed picks them, alone or two at
once.
"""
import os
import signal
import time

from cluster import sh

# the nemeses whose window allows a second execution on a two-phase route
# (reliability.md, at least once 1-3): the handler's process dies, or its
# lease lapses while it cannot reach the store or is frozen.  Not a skew:
# leases and expiry are read from the database's clock, so a second
# execution under a skewed instance clock is an anomaly.
CRASH_WINDOWS = {"kill-inst", "kill-worker", "pause-inst", "pause-worker",
                 "partition-inst-db", "kill-db", "pause-db", "promote-db",
                 "isolate-db-node", "loss-db", "loss-inst", "slow-db",
                 "slow-inst"}


def set_offset(path, offset):
    """Writes libfaketime's offset file whole (a rename: it reads the file
    at every clock call, and must never see it half written)."""
    with open(path + ".new", "w") as f:
        f.write(offset + "\n")
    os.replace(path + ".new", path)


class Nemesis:
    """One fault on one target.  kind names it; apply() and heal() act."""

    def __init__(self, cl, kind, target, arg=None):
        self.cl, self.kind, self.target, self.arg = cl, kind, target, arg
        self.table = "nemesis_%d" % id(self)
        self.paused = []

    def describe(self):
        return "%s %s%s" % (self.kind, self.target,
                            "" if self.arg is None else " " + str(self.arg))

    def _drop(self, role, peers, share=None):
        """Drops what role exchanges with peers (every packet, or share
        percent of them at random, with peers None: of every host)."""
        if peers is None:
            sel_in = sel_out = ""
        else:
            ips = ", ".join(self.cl.ip[p] for p in peers)
            sel_in, sel_out = "ip saddr { %s } " % ips, \
                "ip daddr { %s } " % ips
        rnd = "" if share is None else "numgen random mod 100 < %d " % share
        rules = ("table inet %s {\n"
                 " chain in {\n  type filter hook input priority 0\n"
                 "  %s%sdrop\n }\n"
                 " chain out {\n  type filter hook output priority 0\n"
                 "  %s%sdrop\n }\n}\n" % (self.table, sel_in, rnd, sel_out,
                                           rnd))
        path = os.path.join(self.cl.dir, self.table + ".nft")
        with open(path, "w") as f:
            f.write(rules)
        sh("ip", "netns", "exec", self.cl.ns[role], "nft", "-f", path)

    def _undrop(self, role):
        sh("ip", "netns", "exec", self.cl.ns[role], "nft", "delete", "table",
           "inet", self.table, check=False)

    def _stop(self, pids):
        for p in pids:
            try:
                os.kill(p, signal.SIGSTOP)
                self.paused.append(p)
            except OSError:
                pass

    def apply(self):
        cl, t, k = self.cl, self.target, self.kind
        if k == "partition-inst-db":
            self._drop(t, cl.dbs)
        elif k == "partition-inst-web":
            self._drop(t, ["web"])
        elif k == "isolate-db-node":
            self._drop(t, [d for d in cl.dbs if d != t])
        elif k in ("loss-inst", "loss-db"):
            self._drop(t, None, self.arg)
        elif k in ("slow-inst", "slow-db"):
            sh("ip", "netns", "exec", cl.ns[t], "tc", "qdisc", "add", "dev",
               "eth0", "root", "tbf", "rate", self.arg, "burst", "4kb",
               "latency", "500ms")
        elif k == "pause-inst":
            self._stop(cl.pids_in(t))
        elif k == "pause-worker":
            w = cl.inst_workers(t)
            self._stop(w[:1])
        elif k == "pause-db":
            self._stop(cl.db_pids(t))
        elif k == "skew-inst":
            set_offset(cl.skew_files[t], "%+d" % self.arg)
        elif k == "kill-inst":
            cl.inst_kill(t)
        elif k == "kill-worker":
            w = cl.inst_workers(t)
            if w:
                try:
                    os.kill(w[-1], signal.SIGKILL)
                except OSError:
                    pass
        elif k == "kill-db":
            cl.db_kill(t)
        elif k == "promote-db":
            # the primary, whichever node that is now
            self.target = cl.rd_promote() if cl.topology == "redis" else \
                cl.pg_promote()
        else:
            raise ValueError(k)

    def heal(self):
        cl, t, k = self.cl, self.target, self.kind
        if k in ("partition-inst-db", "partition-inst-web",
                 "isolate-db-node", "loss-inst", "loss-db"):
            self._undrop(t)
        elif k in ("slow-inst", "slow-db"):
            sh("ip", "netns", "exec", cl.ns[t], "tc", "qdisc", "del", "dev",
               "eth0", "root", check=False)
        elif k.startswith("pause-"):
            for p in self.paused:
                try:
                    os.kill(p, signal.SIGCONT)
                except OSError:
                    pass
        elif k == "skew-inst":
            set_offset(cl.skew_files[t], "+0")
        elif k == "kill-inst":
            cl.inst_start(t)
        elif k == "kill-db":
            cl.db_restart(t)
        elif k == "promote-db":
            if cl.topology == "redis":
                cl.rd_replica(t)
            else:
                cl.pg_standby(t)


def kinds(topology):
    """The (kind, targets) a schedule picks from."""
    insts = ["i1", "i2", "i3"]
    dbs = {"galera": ["d1", "d2", "d3"], "postgres": ["d1", "d2"],
           "redis": ["d1", "d2"]}.get(topology, ["db"])
    k = [("partition-inst-db", insts), ("partition-inst-web", insts),
         ("loss-inst", insts), ("slow-inst", insts), ("pause-inst", insts),
         ("pause-worker", insts), ("skew-inst", insts),
         ("kill-inst", insts), ("kill-worker", insts),
         ("loss-db", dbs), ("slow-db", dbs), ("pause-db", dbs),
         ("kill-db", dbs)]
    if topology == "galera":
        k.append(("isolate-db-node", dbs))
    if topology in ("postgres", "redis"):
        # the primary killed and its standby promoted (the target named
        # is replaced by the primary of the moment)
        k.append(("promote-db", dbs))
    return k


def pick(rng, cl, only=None):
    """One or two nemeses on distinct hosts, at most one of them on the
    database (two Galera nodes down at once leave no primary component to
    come back to)."""
    menu = [(k, ts) for k, ts in kinds(cl.topology)
            if only is None or k in only]
    n = 2 if rng.random() < 0.35 else 1
    chosen, hosts, db = [], set(), False
    for _ in range(10):
        if len(chosen) == n:
            break
        k, ts = rng.choice(menu)
        t = rng.choice(ts)
        on_db = t in cl.dbs
        if t in hosts or (on_db and db):
            continue
        arg = None
        if k.startswith("loss"):
            arg = rng.choice([5, 20, 50])
        elif k.startswith("slow"):
            arg = rng.choice(["256kbit", "2mbit"])
        elif k == "skew-inst":
            arg = rng.choice([-600, -90, -5, 5, 90, 600])
        chosen.append(Nemesis(cl, k, t, arg))
        hosts.add(t)
        db = db or on_db
    return chosen


def run_schedule(rng, cl, hist, stop_at, only=None):
    """Applies nemeses from rng until stop_at (time.time()), each held for
    1-4 s, with 0.5-2 s of calm between.  Records every apply and heal in
    hist; returns the list of (start, end, description) windows and the
    heal times."""
    windows, heals = [], []
    while time.time() + 1.5 < stop_at:
        time.sleep(min(rng.uniform(0.5, 2.0), max(0, stop_at - time.time())))
        if time.time() + 1.5 >= stop_at:
            break
        ns = pick(rng, cl, only)
        start = time.time()
        for n in ns:
            hist.event("apply", n.describe())
            n.apply()
        time.sleep(rng.uniform(1.0, 4.0))
        for n in ns:
            n.heal()
            hist.event("heal", n.describe())
        settle(cl)
        end = time.time()
        heals.append(end)
        for n in ns:
            windows.append((start, end, n.kind, n.target))
    return windows, heals


def settle(cl, limit=60):
    """Waits (bounded) for a Galera cluster to be whole again, for a
    PostgreSQL primary to have its synchronous standby streaming again, or
    for a Redis master to have its replica again."""
    deadline = time.time() + limit
    if cl.topology == "galera":
        while time.time() < deadline and cl.galera_size() < 3:
            time.sleep(0.2)
    elif cl.topology == "postgres":
        while time.time() < deadline and not cl.pg_synced():
            time.sleep(0.2)
    elif cl.topology == "redis":
        while time.time() < deadline and not cl.rd_synced():
            time.sleep(0.2)
