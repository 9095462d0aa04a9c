#!/usr/bin/env python3
"""client.py - POST to an idemfcgi API safely: one Idempotency-Key for the
operation, reused on every retry, so the server runs it once whatever the
network does (docs/protocol.md).  Python 3 standard library only.

    client.py [-k KEY] [-s STATE-URL] [-n ATTEMPTS] [-t SECONDS] URL [JSON-BODY]

or, from Python:

    from client import post
    status, headers, body = post("http://host/api/payments",
                                 b'{"amount": 5}')

Retries, after Retry-After when the answer has one (else 1 s, 2 s, 4 s, ...
up to 30 s): a connection that failed or timed out, 5xx, 429, and 409
IDEMPOTENCY_IN_FLIGHT (the first request with this key still runs).  Stops
at anything else: 2xx and 3xx (done), 409 IDEMPOTENCY_CONFLICT (this key
was used for another request: a bug of the caller, never retried) and every
other 4xx.  Exit status: 0 for 2xx or 3xx; 1 for another final answer; 2
when the attempts or the time ran out (the operation may or may not have
happened: retry it later with the same key); 64 for bad usage.

A client that lost its answer, and kept only the key, asks first what
became of it with -s STATE-URL (the service's /idempotency/keys:
GET STATE-URL/KEY, docs/protocol.md, or key_state() from Python): a key
past its lifetime ("expired": it was answered, and a retry is refused)
stops there, exit status 1, the state on stdout; any other state sends
the request (absent: it runs; committed: its answer is replayed; in
flight: it is waited for).
"""
import argparse
import http.client
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid


class GaveUp(Exception):
    """The attempts or the time ran out without a final answer."""

    def __init__(self, key, last):
        super().__init__("no final answer; retry later with key %s" % key)
        self.key = key
        self.last = last  # (status, headers, body) of the last answer, or None


def _retry_after(headers):
    """Retry-After in seconds, or None (absent, or an HTTP date)."""
    value = (headers.get("Retry-After") or "").strip()
    return int(value) if value.isdigit() else None


def _code(body):
    """The code of a problem answer ("IDEMPOTENCY_IN_FLIGHT"), or None."""
    try:
        code = json.loads(body).get("code")
    except (ValueError, AttributeError):
        return None
    return code if isinstance(code, str) else None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is the answer: urllib would turn the POST into a GET."""

    def redirect_request(self, *args, **kwargs):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def _send(url, body, key, timeout):
    """One POST.  Returns (status, headers, body); raises OSError or
    http.client.HTTPException when no answer came."""
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Idempotency-Key": key, "Content-Type": "application/json"})
    try:
        with _opener.open(req, timeout=timeout) as res:
            return res.status, res.headers, res.read()
    except urllib.error.HTTPError as e:   # an answer, of status >= 400
        with e:
            return e.code, e.headers, e.read()


def key_state(state_url, key, timeout=30, headers=None):
    """What became of key: the service's answer to GET STATE-URL/KEY as
    a dict ({"key": ..., "state": "absent" | "in-flight" | "paused" |
    "committed" | "unknown" | "expired", ...}).  Raises OSError,
    http.client.HTTPException or ValueError (no answer, or not one)."""
    url = state_url.rstrip("/") + "/" + urllib.parse.quote(key, safe="")
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as res:
        doc = json.loads(res.read())
    if not isinstance(doc, dict) or not isinstance(doc.get("state"), str):
        raise ValueError("not a key's state: %r" % (doc,))
    return doc


def post(url, body, key=None, attempts=5, seconds=60, log=None):
    """POSTs body (bytes) to url with key (default: a fresh UUID), retrying
    as the module says.  Returns the final (status, headers, body); raises
    GaveUp.  log, when given, is called with a line per attempt."""
    key = key or str(uuid.uuid4())
    if not 1 <= len(key) <= 255 or not all("!" <= c <= "~" for c in key):
        raise ValueError("a key is 1 to 255 visible ASCII characters")
    log = log or (lambda line: None)
    log("idempotency key: %s" % key)
    deadline = time.monotonic() + seconds
    backoff, last = 1, None
    for n in range(1, attempts + 1):
        wait = None
        try:
            left = max(1.0, deadline - time.monotonic())
            status, headers, data = last = _send(url, body, key, left)
            code = _code(data)
            log("attempt %d: %d%s" % (n, status, " " + code if code else ""))
            if status < 400:
                return last
            if status == 409:
                if code != "IDEMPOTENCY_IN_FLIGHT":
                    return last   # IDEMPOTENCY_CONFLICT, or the handler's
            elif status != 429 and status < 500:
                return last
            wait = _retry_after(headers)
        except (OSError, http.client.HTTPException) as e:
            log("attempt %d: no answer: %s" % (n, e))
        if wait is None:
            wait, backoff = backoff, min(backoff * 2, 30)
        if n == attempts or time.monotonic() + wait >= deadline:
            break
        log("retrying in %ds" % wait)
        time.sleep(wait)
    raise GaveUp(key, last)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", dest="key", help="the operation's key "
                    "(default: a fresh UUID)")
    ap.add_argument("-n", dest="attempts", type=int, default=5)
    ap.add_argument("-t", dest="seconds", type=int, default=60)
    ap.add_argument("-s", dest="state_url", help="ask STATE-URL/KEY "
                    "what became of the key first")
    ap.add_argument("url")
    ap.add_argument("body", nargs="?", default="{}")
    try:
        args = ap.parse_args(argv)
    except SystemExit:
        return 64
    if args.attempts < 1 or args.seconds < 1:
        ap.print_usage(sys.stderr)
        return 64

    def log(line):
        print(line, file=sys.stderr, flush=True)

    if args.state_url:
        if not args.key:
            log("%s: -s needs the key (-k) of the operation" % ap.prog)
            return 64
        try:
            state = key_state(args.state_url, args.key, args.seconds)
        except (OSError, http.client.HTTPException, ValueError) as e:
            log("state of the key: no answer: %s" % e)
            return 2
        log("state of the key: %s" % state["state"])
        if state["state"] == "expired":
            log("the operation was answered (status %s) and its key "
                "expired: not sent again (a new operation needs a new "
                "key)" % state.get("status", "?"))
            sys.stdout.write(json.dumps(state) + "\n")
            return 1
    try:
        status, _, data = post(args.url, args.body.encode(), args.key,
                               args.attempts, args.seconds, log)
    except ValueError as e:
        log("%s: %s" % (ap.prog, e))
        return 64
    except GaveUp as e:
        log("giving up; retry later with key %s" % e.key)
        if e.last is not None:
            sys.stdout.buffer.write(e.last[2] + b"\n")
        return 2
    sys.stdout.buffer.write(data + b"\n")
    return 0 if status < 400 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
