"""The clients: threads sending keyed requests through lighttpd's unix
socket, and the history they record (one JSON line per operation: key,
route, body, status, code, time sent, time answered, the request id, or
the error when no answer came).

Workloads (each key belongs to one):
  ledger   POST /api/accounts/a-KEY/deposit {"amount": 1..9}: transactional;
           its effect is the account's balance
  tx       POST /api/testkit/tx/201 {"n": N}: transactional; its effect is
           one row of testkit_effects per execution
  echo     POST /api/testkit/echo {"n": N}: two-phase; its effect is one
           line of the testkit log per execution
  sleep    POST /api/testkit/sleep/20 {"n": N}: the same with a handler
           of 20 ms, a window a crash can fall in
  payments POST /api/payments {"account": "p-KEY", "amount": N}: recovery
           points against the test provider; its effect is the provider's
           charges
and, over those keys, replays (the same request again), conflicts (the key
with another body: a ledger amount of 100..900, another N) and hot keys
(one key per workload sent by every client).
"""
import http.client
import json
import socket
import threading
import time

WORKLOADS = ("ledger", "tx", "echo", "sleep", "payments")
TWO_PHASE = ("echo", "sleep")


class History:
    """The run's history file, appended by every client thread."""

    def __init__(self, path):
        self.f = open(path, "w")
        self.lock = threading.Lock()
        self.ops = 0

    def write(self, rec):
        line = json.dumps(rec, sort_keys=True)
        with self.lock:
            self.f.write(line + "\n")
            if "op" in rec:
                self.ops += 1

    def event(self, what, desc):
        self.write({"event": what, "nemesis": desc, "t": time.time()})

    def close(self):
        self.f.close()


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("nemesis", timeout=timeout)
        self.path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def request_for(workload, key, variant):
    """(path, body) of key's request; variant 0 is the first request,
    another number a conflicting one."""
    if workload == "ledger":
        amount = variant * 100 if variant else 1 + sum(key.encode()) % 9
        return "/api/accounts/a-%s/deposit" % key, {"amount": amount}
    if workload == "tx":
        return "/api/testkit/tx/201", {"n": variant}
    if workload == "echo":
        return "/api/testkit/echo", {"n": variant}
    if workload == "sleep":
        return "/api/testkit/sleep/20", {"n": variant}
    return "/api/payments", {"account": "p-" + key,
                             "amount": 100 + variant}


def send(sock, hist, phase, workload, key, variant, timeout=4, fault=None):
    """Sends one request (with fault: X-Idemfcgi-Fault, which kills its
    worker at that point) and records it.  Returns the record."""
    path, body = request_for(workload, key, variant)
    data = json.dumps(body, sort_keys=True)
    rec = {"op": workload, "phase": phase, "key": key, "variant": variant,
           "path": path, "body": data, "t0": time.time()}
    headers = {"Idempotency-Key": key, "Content-Type": "application/json"}
    if fault:
        headers["X-Idemfcgi-Fault"] = fault
        rec["fault"] = fault
    c = UnixHTTP(sock, timeout)
    try:
        c.request("POST", path, body=data, headers=headers)
        r = c.getresponse()
        raw = r.read().decode("utf-8", "replace")
        rec["status"] = r.status
        rec["answer"] = raw
        rec["replayed"] = r.getheader("Idempotent-Replayed") == "true"
        rec["request_id"] = r.getheader("X-Request-Id")
        if r.getheader("Content-Type", "").startswith(
                "application/problem+json"):
            try:
                rec["code"] = json.loads(raw).get("code")
            except ValueError:
                pass
    except (OSError, http.client.HTTPException) as e:
        rec["error"] = type(e).__name__
    finally:
        c.close()
    rec["t1"] = time.time()
    hist.write(rec)
    return rec


def final(rec):
    """Whether rec's answer is final: a 2xx, a conflict (another body won
    the key), a declined payment."""
    st = rec.get("status", 0)
    return 200 <= st < 300 or st == 422 or \
        rec.get("code") == "IDEMPOTENCY_CONFLICT"


class Clients:
    """n client threads until stop_at, their choices from rng's seed."""

    def __init__(self, sock, hist, seed, n, workloads):
        self.sock, self.hist, self.seed, self.n = sock, hist, seed, n
        self.workloads = workloads
        self.keys = {}               # key -> workload
        self.lock = threading.Lock()
        self.seq = 0
        # every tenth new ledger key's first send kills its worker after
        # the handler, before the answer's commit (--sabotage-ledger)
        self.kill_ledger = False

    def _new_key(self, w):
        with self.lock:
            self.seq += 1
            k = "s%d-%s-%d" % (self.seed, w, self.seq)
            self.keys[k] = w
            return k

    def _old_key(self, rng):
        with self.lock:
            if not self.keys:
                return None, None
            k = rng.choice(list(self.keys))
            return k, self.keys[k]

    def _until_final(self, w, k, stop_at):
        """Sends key k's first request, and again 0.2 s after each answer
        that is not final (as a client that must know does), for at most
        10 s (over inflight-ttl, 3 s: a dead instance's key is freed by
        then) and until stop_at."""
        give_up = time.time() + 10
        fault = "after-handler" if self.kill_ledger and w == "ledger" and \
            int(k.rsplit("-", 1)[1] if k[-1].isdigit() else 1) % 10 == 0 \
            else None
        while True:
            rec = send(self.sock, self.hist, "load", w, k, 0, fault=fault)
            fault = None
            if final(rec) or time.time() >= min(stop_at, give_up):
                return
            time.sleep(0.2)

    def _loop(self, i, stop_at):
        import random
        rng = random.Random(self.seed * 1000 + i)
        while time.time() < stop_at:
            r = rng.random()
            if r < 0.6:
                w = rng.choice(self.workloads)
                self._until_final(w, self._new_key(w), stop_at)
            elif r < 0.8:
                k, w = self._old_key(rng)
                if k is not None:
                    send(self.sock, self.hist, "load", w, k, 0)
            elif r < 0.9:
                k, w = self._old_key(rng)
                if k is not None:
                    send(self.sock, self.hist, "load", w, k,
                         rng.randint(1, 9))
            else:
                w = rng.choice(self.workloads)
                k = "s%d-%s-hot" % (self.seed, w)
                with self.lock:
                    self.keys[k] = w
                self._until_final(w, k, stop_at)

    def run(self, stop_at):
        ts = [threading.Thread(target=self._loop, args=(i, stop_at), daemon=True)
              for i in range(self.n)]
        for t in ts:
            t.start()
        return ts

    def finish(self, limit):
        """Every key retried with its first request until a final answer
        (2xx, or a conflict when another body won), within limit
        seconds; returns the keys left without one."""
        deadline = time.time() + limit
        todo = sorted(self.keys.items())
        lock = threading.Lock()
        left = []

        def worker():
            while True:
                with lock:
                    if not todo:
                        return
                    k, w = todo.pop()
                while True:
                    rec = send(self.sock, self.hist, "final", w, k, 0,
                               timeout=10)
                    if final(rec):
                        break
                    if time.time() > deadline:
                        with lock:
                            left.append(k)
                        break
                    time.sleep(0.2)

        ts = [threading.Thread(target=worker, daemon=True)
              for _ in range(self.n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return left
