#!/bin/sh
# TAP: the Iceberg REST catalog (handlers/iceberg) behind a private
# lighttpd, driven by iceberg-js (catalog.mjs), then by a client that
# retries as the spec says (retry.mjs), on each store: memory, MySQL and
# PostgreSQL (private servers).  On the durable stores idemfcgi runs two
# workers with IDEMFCGI_TEST_FAULTS=1, and the retrying client kills them
# at points of the protocol (X-Idemfcgi-Fault).  scripts/deps installs the
# pinned iceberg-js into /opt/idemfcgi-iceberg-js (IDEM_ICEBERG_JS names
# another copy of its dist/index.mjs).  IDEM_ICEBERG_ROUNDS bounds the
# retry run (default 8 rounds of 10 operations).
set -u
b=${IDEM_BUILDDIR:?}
s=${IDEM_SRCDIR:?}
icejs=${IDEM_ICEBERG_JS:-/opt/idemfcgi-iceberg-js/node_modules/iceberg-js/dist/index.mjs}
rounds=${IDEM_ICEBERG_ROUNDS:-8}
mkdir -p "$b/tmp"
tmp=$(mktemp -d "$b/tmp/iceberg.XXXXXX")
chmod 755 "$b/tmp" "$tmp"
srv=
web=
db=
pg=
cleanup() {
	[ -n "$web" ] && kill "$web" 2>/dev/null
	[ -n "$srv" ] && kill "$srv" 2>/dev/null
	[ -n "$db" ] && "$s/tests/lib/mariadb-ctl" stop "$db" >/dev/null 2>&1
	[ -n "$pg" ] && "$s/tests/lib/postgres-ctl" stop "$pg" >/dev/null 2>&1
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
echo 1..8

if [ -f "$icejs" ] && command -v node >/dev/null; then
	echo "ok 1 - iceberg-js and Node.js are installed"
else
	echo "not ok 1 - iceberg-js at $icejs and Node.js (scripts/deps installs them)"
	exit 0
fi

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts idemfcgi on config $1 and lighttpd in front of it; sets $url.
start() {
	: >"$tmp/server.log"
	rm -f "$tmp/idemfcgi.sock"
	"$b/idemfcgi" -c "$1" >>"$tmp/server.log" 2>&1 &
	srv=$!
	i=0
	until [ -S "$tmp/idemfcgi.sock" ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && return 1
		sleep 0.1
	done
	port=$(free_port)
	cat >"$tmp/lighttpd.conf" <<CONF
server.modules = ( "mod_fastcgi" )
server.document-root = "$tmp"
server.bind = "127.0.0.1"
server.port = $port
server.errorlog = "$tmp/lighttpd.err"
server.http-parseopts = ( "url-ctrls-reject" => "disable" )
fastcgi.server = ( "/" => ((
	"socket" => "$tmp/idemfcgi.sock",
	"check-local" => "disable",
	"fix-root-scriptname" => "enable",
)))
CONF
	lighttpd -D -f "$tmp/lighttpd.conf" >"$tmp/lighttpd.out" 2>&1 &
	web=$!
	url=http://127.0.0.1:$port/
	i=0
	until curl -s -o /dev/null "${url}v1/config"; do
		i=$((i + 1))
		[ $i -gt 100 ] && return 1
		sleep 0.1
	done
}

stop() {
	kill "$web" "$srv" 2>/dev/null
	wait "$web" "$srv" 2>/dev/null
	web= srv=
}

# Writes the config of store $1 (with the lines of $2 after it).
config() {
	workers=1
	[ "$1" != memory ] && workers=2
	cat >"$tmp/idemfcgi.conf" <<CONF
[server]
listen = unix:$tmp/idemfcgi.sock
workers = $workers
threads = 4
path-source = request-uri
plugins = $b/.libs/iceberg.so
[idempotency]
store = $1
required = false
inflight-ttl = 2s
[iceberg]
warehouse = $tmp/warehouse-$1
purge-interval = 200ms
$2
CONF
}

n=2
# Runs catalog.mjs and retry.mjs on store $1, faults $2 (0 or 1).
scenarios() {
	if start "$tmp/idemfcgi.conf" &&
	    node "$s/tests/iceberg/catalog.mjs" "$url" "$icejs" \
	    "$tmp/warehouse-$1" >"$tmp/node.out" 2>&1; then
		echo "ok $n - iceberg-js drives the catalog on the $1 store"
	else
		echo "not ok $n - iceberg-js drives the catalog on the $1 store"
		sed 's/^/# /' "$tmp/node.out" "$tmp/server.log" | tail -40
	fi
	n=$((n + 1))
	if node "$s/tests/iceberg/retry.mjs" "$url" "$icejs" "$rounds" "$2" \
	    >"$tmp/node.out" 2>&1; then
		echo "ok $n - a retrying client succeeds once per operation on" \
		    "the $1 store ($(tail -n 1 "$tmp/node.out"))"
	else
		echo "not ok $n - a retrying client succeeds once per operation" \
		    "on the $1 store"
		sed 's/^/# /' "$tmp/node.out" | tail -30
		grep -v ' info ' "$tmp/server.log" | sed 's/^/# /' | tail -20
	fi
	n=$((n + 1))
	stop
}

# without idempotency there is no store: each worker would keep a
# catalog of its own, so the catalog refuses to start
config mysql "[idempotency]
enabled = false"
if "$b/idemfcgi" --check -c "$tmp/idemfcgi.conf" >"$tmp/check.log" 2>&1 ||
    ! grep -q 'needs idempotency enabled' "$tmp/check.log"; then
	echo "not ok $n - the catalog refuses to start with idempotency disabled"
	sed 's/^/# /' "$tmp/check.log"
else
	echo "ok $n - the catalog refuses to start with idempotency disabled"
fi
n=$((n + 1))

config memory ""
scenarios memory 0

export IDEMFCGI_TEST_FAULTS=1
db=$(mktemp -d "$b/tmp/mariadb.XXXXXX")
if "$s/tests/lib/mariadb-ctl" start "$db" 0 --skip-networking \
    >"$tmp/mariadb.log" 2>&1; then
	config mysql "[mysql]
socket = /tmp/idemfcgi-mdb-$(basename "$db").sock
user = idem
password-file = $db/password
database = idem"
	scenarios mysql 1
else
	echo "not ok 5 - a private MariaDB starts"
	echo "not ok 6 - a private MariaDB starts"
	n=7
fi

pg=$(mktemp -d "$b/tmp/postgres.XXXXXX")
chmod 755 "$pg"
port=
for try in 1 2 3; do
	p=$(free_port)
	"$s/tests/lib/postgres-ctl" start "$pg" "$p" >"$tmp/postgres.log" 2>&1 &&
	    port=$p && break
done
if [ -n "$port" ]; then
	config postgres "[postgres]
host = 127.0.0.1
port = $port
user = idem
password-file = $pg/password
database = idem"
	scenarios postgres 1
else
	echo "not ok 7 - a private PostgreSQL starts"
	echo "not ok 8 - a private PostgreSQL starts"
fi
