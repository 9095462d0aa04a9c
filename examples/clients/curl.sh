#!/bin/sh
# curl.sh - POST to an idemfcgi API safely: one Idempotency-Key for the
# operation, reused on every retry, so the server runs it once whatever
# the network does (docs/protocol.md).
#
#   curl.sh [-k KEY] [-s STATE-URL] [-n ATTEMPTS] [-t SECONDS] URL [JSON-BODY]
#
#   -k KEY       the operation's key (default: a fresh UUID).  Keep it
#                with the operation if the caller may itself restart:
#                a retry after a restart must send the same key.
#   -n ATTEMPTS  at most this many requests (default 5)
#   -t SECONDS   and at most this long in all (default 60)
#   -s STATE-URL a client that lost its answer, and kept only the key,
#                asks first what became of it: GET STATE-URL/KEY (the
#                service's /idempotency/keys, docs/protocol.md).  A key
#                past its lifetime ("expired": it was answered, and a
#                retry is refused) stops here, exit status 1, the
#                state on stdout; any other state sends the request
#                (absent: it runs; committed: its answer is replayed;
#                in flight: it is waited for)
#
# Retries, after Retry-After when the answer has one (else 1 s, 2 s, 4 s,
# ... up to 30 s): a connection that failed or timed out, 5xx, 429, and
# 409 IDEMPOTENCY_IN_FLIGHT (the first request with this key still
# runs).  Stops at anything else: 2xx and 3xx (done), 409
# IDEMPOTENCY_CONFLICT (this key was used for another request: a bug of
# the caller, never retried) and every other 4xx.  Prints the final
# answer's body on stdout, and each attempt on stderr.  Exit status: 0
# for 2xx or 3xx; 1 for another final answer; 2 when the attempts or the
# time ran out (the operation may or may not have happened: retry it
# later with the same key); 64 for bad usage.
set -u
export LC_ALL=C
key='' attempts=5 budget=60 state_url=''
usage() { echo "usage: $0 [-k KEY] [-s STATE-URL] [-n ATTEMPTS] [-t SECONDS] URL [JSON-BODY]" >&2; exit 64; }
while getopts k:n:t:s: opt; do
	case $opt in
	k) key=$OPTARG ;;
	s) state_url=$OPTARG ;;
	n) attempts=$OPTARG ;;
	t) budget=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
for v in "$attempts" "$budget"; do
	case $v in ''|*[!0-9]*) usage ;; esac
done
if [ "$attempts" -lt 1 ] || [ "$budget" -lt 1 ]; then usage; fi
url=$1 body=${2:-'{}'}
# asking what became of a key needs the key
[ -z "$state_url" ] || [ -n "$key" ] || usage
if [ -z "$key" ]; then
	key=$(cat /proc/sys/kernel/random/uuid 2>/dev/null || uuidgen) || {
		echo "$0: cannot make a UUID" >&2; exit 64; }
fi
# a key is 1 to 255 visible ASCII characters (no space, no line break)
case $key in *[!!-~]*) usage ;; esac
[ ${#key} -le 255 ] || usage
echo "idempotency key: $key" >&2

tmp=$(mktemp -d "${TMPDIR:-/tmp}/idem-curl.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
if [ -n "$state_url" ]; then
	# the key as a path segment: visible ASCII, percent-encoded where a
	# URL needs it
	seg=$(printf '%s' "$key" | od -An -v -tx1 | tr -d ' \n' |
	    sed 's/../%&/g')
	if ! curl -sS -f -o "$tmp/state" --max-time "$budget" \
	    "${state_url%/}/$seg" 2>"$tmp/err"; then
		echo "state of the key: no answer: $(cat "$tmp/err")" >&2
		exit 2
	fi
	state=$(sed -n 's/.*"state" *: *"\([a-z-]*\)".*/\1/p' "$tmp/state")
	echo "state of the key: ${state:-?}" >&2
	if [ "$state" = expired ]; then
		status=$(sed -n 's/.*"status" *: *\([0-9]*\).*/\1/p' \
		    "$tmp/state")
		echo "the operation was answered (status ${status:-?}) and" \
		    "its key expired: not sent again (a new operation needs" \
		    "a new key)" >&2
		cat "$tmp/state"; echo; exit 1
	fi
fi
start=$(date +%s)
n=0 backoff=1
while :; do
	n=$((n + 1))
	left=$((start + budget - $(date +%s)))
	[ "$left" -ge 1 ] || left=1
	# curl's own exit status says whether an answer came (0) or not
	status=$(curl -sS -o "$tmp/body" -D "$tmp/head" -w '%{http_code}' \
	    --max-time "$left" -X POST -H "Idempotency-Key: $key" \
	    -H 'Content-Type: application/json' --data-binary "$body" \
	    "$url" 2>"$tmp/err")
	rc=$?
	wait_s=
	if [ $rc != 0 ]; then
		echo "attempt $n: no answer: $(cat "$tmp/err")" >&2
	else
		# a problem's code ("IDEMPOTENCY_IN_FLIGHT"), when there is one
		code=$(sed -n 's/.*"code" *: *"\([A-Za-z0-9_]*\)".*/\1/p' \
		    "$tmp/body" | head -n 1)
		echo "attempt $n: $status${code:+ $code}" >&2
		case $status in
		2??|3??)
			cat "$tmp/body"; echo; exit 0 ;;
		409)
			if [ "$code" != IDEMPOTENCY_IN_FLIGHT ]; then
				# IDEMPOTENCY_CONFLICT, or the handler's own 409
				cat "$tmp/body"; echo; exit 1
			fi ;;
		429|5??) ;;
		*)
			cat "$tmp/body"; echo; exit 1 ;;
		esac
		# Retry-After in seconds (an HTTP date is left to the back-off)
		wait_s=$(tr -d '\r' <"$tmp/head" |
		    sed -n 's/^[Rr][Ee][Tt][Rr][Yy]-[Aa][Ff][Tt][Ee][Rr]: *\([0-9][0-9]*\) *$/\1/p' |
		    tail -n 1)
	fi
	[ -n "$wait_s" ] || { wait_s=$backoff; backoff=$((backoff * 2));
	    [ $backoff -le 30 ] || backoff=30; }
	if [ $n -ge "$attempts" ] ||
	    [ $(($(date +%s) + wait_s)) -ge $((start + budget)) ]; then
		echo "giving up after $n attempts; retry later with key $key" >&2
		[ -s "$tmp/body" ] && { cat "$tmp/body"; echo; }
		exit 2
	fi
	echo "retrying in ${wait_s}s" >&2
	sleep "$wait_s"
done
