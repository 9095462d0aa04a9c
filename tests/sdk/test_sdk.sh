#!/bin/sh
# TAP: the plugin SDK.  Installs idemfcgi into a temporary staging root
# (make install DESTDIR=...), builds examples/notes there with nothing but
# the installed header, library and pkg-config file, loads it into the
# installed idemfcgi and calls it: on the memory store, then on the MySQL
# store of a private MariaDB (tests/lib/mariadb-ctl), where its POST is a
# transactional route.  Then does with examples/skeleton what
# docs/plugins.md walks through: a copy built with its own Makefile, its
# own test (make test) run on both stores.  Then both plugins, unchanged,
# on the PostgreSQL store of a private PostgreSQL (tests/lib/postgres-ctl).  The staging root has the Grafana dashboard and the
# alerting rules too.
set -u
b=${IDEM_BUILDDIR:?} s=${IDEM_SRCDIR:?}
tmp=$(mktemp -d /tmp/idemfcgi-sdk.XXXXXX)
pid='' db='' pg=''
stop_server() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	pid=
}
finish() {
	stop_server
	if [ -n "$db" ]; then
		"$s/tests/lib/mariadb-ctl" stop "$db"
		[ -n "${IDEM_KEEP:-}" ] || rm -rf "$db"
	fi
	if [ -n "$pg" ]; then
		"$s/tests/lib/postgres-ctl" stop "$pg" >/dev/null 2>&1
		[ -n "${IDEM_KEEP:-}" ] || rm -rf "$pg"
	fi
	rm -rf "$tmp"
}
trap finish EXIT
fail() { echo "not ok $1 - $2"; sed 's/^/# /' "$3"; exit 1; }
echo 1..16

make -C "$b" install DESTDIR="$tmp/root" >"$tmp/install.log" 2>&1 ||
	fail 1 "make install into a staging root" "$tmp/install.log"
pc=$(find "$tmp/root" -name idemfcgi.pc)
[ -n "$pc" ] || fail 1 "make install installs idemfcgi.pc" "$tmp/install.log"
# and what operators watch it with, under the data directory
for f in grafana/idemfcgi.json prometheus/idemfcgi-rules.yml; do
	[ -n "$(find "$tmp/root" -path "*/share/idemfcgi/$f")" ] ||
		fail 1 "make install installs share/idemfcgi/$f" "$tmp/install.log"
done
echo "ok 1 - make install into a staging root"
# The staged .pc file names the configured prefix; a copy names the
# staging root instead.  (pkg-config --define-prefix would move the
# system's .pc files too: mysqlclient's -I/usr/include/mariadb would
# become -I/usr/lib/include/mariadb.)
mkdir "$tmp/pkgconfig"
prefix=$(sed -n 's/^prefix=//p' "$pc")
for f in idemfcgi idemfcgi-mysql; do
	sed "s|^prefix=.*|prefix=$tmp/root$prefix|" "$(dirname "$pc")/$f.pc" \
		>"$tmp/pkgconfig/$f.pc"
done
export PKG_CONFIG_PATH="$tmp/pkgconfig"
libdir=$(pkg-config --variable=libdir idemfcgi)
bin=$(find "$tmp/root" -path '*/bin/idemfcgi')

# a copy outside both trees, as a third party would have it
cp -r "$s/examples/notes" "$tmp/notes"
chmod -R u+w "$tmp/notes"
rm -f "$tmp/notes/notes.so"
make -C "$tmp/notes" CFLAGS="-O2 -Wall -Wextra -Werror" \
	>"$tmp/build.log" 2>&1 ||
	fail 2 "examples/notes builds against the installed SDK" "$tmp/build.log"
grep -q -- "-I$tmp/root/.*/include" "$tmp/build.log" ||
	fail 2 "the build used the installed header" "$tmp/build.log"
echo "ok 2 - examples/notes builds against the installed SDK"

cat > "$tmp/idemfcgi.conf" <<CONF
[server]
listen = unix:$tmp/idemfcgi.sock
plugins = $tmp/notes/notes.so
[notes]
max-notes = 10
CONF
export LD_LIBRARY_PATH="$libdir"
"$bin" --check -c "$tmp/idemfcgi.conf" >"$tmp/check.log" 2>&1 ||
	fail 3 "the installed idemfcgi loads the plugin" "$tmp/check.log"
echo "ok 3 - the installed idemfcgi loads the plugin"

# start_server CONF: runs the installed idemfcgi until finish, or
# stop_server, and waits for its socket
start_server() {
	rm -f "$tmp/idemfcgi.sock"
	"$bin" -c "$1" 2>>"$tmp/server.log" &
	pid=$!
	i=0
	while [ ! -S "$tmp/idemfcgi.sock" ] && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
}
# call METHOD URI [BODY [VAR=VALUE...]]: one request, the answer on stdout
call() {
	m=$1 u=$2 body=${3:-}
	shift 2
	[ $# -gt 0 ] && shift
	printf '%s' "$body" | env -i REQUEST_METHOD="$m" REQUEST_URI="$u" \
	    CONTENT_LENGTH=${#body} "$@" \
	    cgi-fcgi -bind -connect "$tmp/idemfcgi.sock"
}
# post KEY BODY [VAR=VALUE...]
post() {
	k=$1 body=$2
	shift 2
	call POST /notes "$body" HTTP_IDEMPOTENCY_KEY="$k" "$@"
}

start_server "$tmp/idemfcgi.conf"
first=$(post note-1 '{"text":"hello"}')
again=$(post note-1 '{"text":"hello"}')
other=$(post note-2 '{"text":"world"}')
# under a mount, as lighttpd passes it: Location names the URL under it
mounted=$(post note-3 '{"text":"mounted"}' SCRIPT_NAME=/api PATH_INFO=/notes)
{ echo "$first"; echo "$again"; echo "$other"; echo "$mounted"
  cat "$tmp/server.log"; } >"$tmp/calls.log"
cr=$(printf '\r')
echo "$first" | grep -q '{"id":1,"text":"hello"}' &&
echo "$first" | grep -q "^Location: /notes/1$cr\$" &&
echo "$again" | grep -q 'Idempotent-Replayed: true' &&
echo "$again" | grep -q '{"id":1,"text":"hello"}' &&
echo "$again" | grep -q "^Location: /notes/1$cr\$" &&
echo "$other" | grep -q '{"id":2,"text":"world"}' &&
echo "$mounted" | grep -q "^Location: /api/notes/3$cr\$" ||
	fail 4 "the plugin answers, and a retry replays" "$tmp/calls.log"
echo "ok 4 - the plugin answers, and a retry replays"
stop_server

# ------------------------------------------------------ the MySQL store
# A private MariaDB under the build tree (where scripts/test finds what a
# crash left), on its unix socket only: no port to race other tests for.
mkdir -p "$b/tmp"
db=$(mktemp -d "$b/tmp/mariadb.XXXXXX")
"$s/tests/lib/mariadb-ctl" start "$db" 0 --skip-networking \
	>"$tmp/mariadb.log" 2>&1 ||
	fail 5 "a private MariaDB starts" "$tmp/mariadb.log"
sql() { "$s/tests/lib/mariadb-ctl" sql "$db" "$1" 2>&1; }
cat > "$tmp/idemfcgi-mysql.conf" <<CONF
[server]
listen = unix:$tmp/idemfcgi.sock
plugins = $tmp/notes/notes.so
[idempotency]
store = mysql
[mysql]
socket = /tmp/idemfcgi-mdb-$(basename "$db").sock
user = idem
password-file = $db/password
database = idem
CONF
: >"$tmp/server.log"
# X-Idemfcgi-Fault: after-handler kills the worker between the handler
# and the COMMIT (a test-only switch of the framework)
export IDEMFCGI_TEST_FAULTS=1
start_server "$tmp/idemfcgi-mysql.conf"
[ -S "$tmp/idemfcgi.sock" ] && [ "$(sql 'SHOW TABLES LIKE "notes"')" = notes ] ||
	fail 5 "on the MySQL store the plugin starts and creates its table" \
	    "$tmp/server.log"
echo "ok 5 - on the MySQL store the plugin starts and creates its table"

first=$(post tx-1 '{"text":"hello"}')
rows=$(sql 'SELECT id, text FROM notes')
{ echo "$first"; echo "rows: $rows"; cat "$tmp/server.log"; } >"$tmp/calls.log"
echo "$first" | grep -q '^Status: 201' &&
echo "$first" | grep -q '{"id":1,"text":"hello"}' &&
[ "$rows" = "$(printf '1\thello')" ] ||
	fail 6 "on MySQL a keyed POST inserts one row" "$tmp/calls.log"
echo "ok 6 - on MySQL a keyed POST inserts one row"

again=$(post tx-1 '{"text":"hello"}')
rows=$(sql 'SELECT id, text FROM notes')
{ echo "$again"; echo "rows: $rows"; cat "$tmp/server.log"; } >"$tmp/calls.log"
echo "$again" | grep -q 'Idempotent-Replayed: true' &&
echo "$again" | grep -q '{"id":1,"text":"hello"}' &&
[ "$rows" = "$(printf '1\thello')" ] ||
	fail 7 "a retry replays the answer, and the table still has one row" \
	    "$tmp/calls.log"
echo "ok 7 - a retry replays the answer, and the table still has one row"

got=$(call GET /notes/1)
none=$(call GET /notes/99)
{ echo "$got"; echo "$none"; cat "$tmp/server.log"; } >"$tmp/calls.log"
echo "$got" | grep -q '{"id":1,"text":"hello"}' &&
echo "$none" | grep -q '^Status: 404' ||
	fail 8 "GET reads the note from the table" "$tmp/calls.log"
echo "ok 8 - GET reads the note from the table"

# a worker killed after its INSERT, before the COMMIT: the INSERT goes
# with it; the retry (on the worker the master starts instead) inserts
# once, and the next retry replays
post tx-2 '{"text":"world"}' HTTP_X_IDEMFCGI_FAULT=after-handler \
	>"$tmp/killed.out" 2>&1
before=$(sql 'SELECT COUNT(*) FROM notes')
i=0
until retry=$(post tx-2 '{"text":"world"}') &&
    echo "$retry" | grep -q '^Status: 201'; do
	i=$((i + 1))
	[ $i -gt 100 ] && break
	sleep 0.1
done
again=$(post tx-2 '{"text":"world"}')
rows=$(sql 'SELECT text, COUNT(*) FROM notes GROUP BY text ORDER BY text')
{ cat "$tmp/killed.out"; echo "rows after the kill: $before"; echo "$retry"
  echo "$again"; echo "rows: $rows"; cat "$tmp/server.log"; } >"$tmp/calls.log"
[ "$before" = 1 ] &&
echo "$retry" | grep -q '"text":"world"' &&
echo "$again" | grep -q 'Idempotent-Replayed: true' &&
[ "$(echo "$again" | grep '"text"')" = "$(echo "$retry" | grep '"text"')" ] &&
[ "$rows" = "$(printf 'hello\t1\nworld\t1')" ] ||
	fail 9 "a worker killed before the COMMIT leaves no row; the retry \
inserts once" "$tmp/calls.log"
echo "ok 9 - a worker killed before the COMMIT leaves no row; the retry inserts once"

# ------------------------------------------------------- the skeleton
# docs/plugins.md, "From the skeleton to a served, replayed 201"
stop_server
cp -r "$s/examples/skeleton" "$tmp/things"
chmod -R u+w "$tmp/things"
rm -f "$tmp/things/skeleton.so"
make -C "$tmp/things" CFLAGS="-O2 -Wall -Wextra -Werror" \
	>"$tmp/skeleton-build.log" 2>&1 ||
	fail 10 "examples/skeleton builds with its Makefile" \
	    "$tmp/skeleton-build.log"
echo "ok 10 - examples/skeleton builds with its Makefile"
IDEMFCGI=$bin make -C "$tmp/things" test >"$tmp/skeleton-test.log" 2>&1 ||
	fail 11 "the skeleton's own test passes on the memory store" \
	    "$tmp/skeleton-test.log"
echo "ok 11 - the skeleton's own test passes on the memory store"
sed -n '/^\[idempotency\]/,$p' "$tmp/idemfcgi-mysql.conf" >"$tmp/skeleton-mysql.conf"
IDEMFCGI=$bin sh "$tmp/things/test.sh" "$tmp/things/skeleton.so" \
	"$tmp/skeleton-mysql.conf" >"$tmp/skeleton-test.log" 2>&1
rc=$?
rows=$(sql 'SELECT name, COUNT(*) FROM skeleton_things GROUP BY name')
echo "rows: $rows" >>"$tmp/skeleton-test.log"
[ $rc = 0 ] && [ "$rows" = "$(printf 'first\t1')" ] ||
	fail 12 "on MySQL the skeleton's test passes and makes one row" \
	    "$tmp/skeleton-test.log"
echo "ok 12 - on MySQL the skeleton's test passes and makes one row"

# ------------------------------------------------- the PostgreSQL store
# The same two plugins, unbuilt again: each asks the store's dialect.
stop_server
pg=$(mktemp -d "$b/tmp/postgres.XXXXXX")
chmod 755 "$b/tmp" "$pg"
# a free port can be taken before PostgreSQL binds it: three tries
for try in 1 2 3; do
	port=$(python3 -c 'import socket; s = socket.socket(); \
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$s/tests/lib/postgres-ctl" start "$pg" "$port" \
	    >"$tmp/postgres.log" 2>&1 && break
	port=
done
pgsql() { "$s/tests/lib/postgres-ctl" sql "$pg" "$1" 2>&1; }
cat > "$tmp/idemfcgi-postgres.conf" <<CONF
[server]
listen = unix:$tmp/idemfcgi.sock
plugins = $tmp/notes/notes.so
[idempotency]
store = postgres
[postgres]
host = 127.0.0.1
port = $port
user = idem
password-file = $pg/password
database = idem
CONF
: >"$tmp/server.log"
[ -n "$port" ] && start_server "$tmp/idemfcgi-postgres.conf"
[ -n "$port" ] && [ -S "$tmp/idemfcgi.sock" ] &&
[ "$(pgsql "SELECT to_regclass('notes')")" = notes ] ||
	{ cat "$tmp/postgres.log" >>"$tmp/server.log"
	  fail 13 "on the PostgreSQL store the plugin starts and creates its \
table" "$tmp/server.log"; }
echo "ok 13 - on the PostgreSQL store the plugin starts and creates its table"

first=$(post pg-1 '{"text":"hello"}')
again=$(post pg-1 '{"text":"hello"}')
rows=$(pgsql 'SELECT id, text FROM notes')
{ echo "$first"; echo "$again"; echo "rows: $rows"; cat "$tmp/server.log"
} >"$tmp/calls.log"
echo "$first" | grep -q '^Status: 201' &&
echo "$first" | grep -q '{"id":1,"text":"hello"}' &&
echo "$again" | grep -q 'Idempotent-Replayed: true' &&
echo "$again" | grep -q '{"id":1,"text":"hello"}' &&
[ "$rows" = "$(printf '1\thello')" ] ||
	fail 14 "on PostgreSQL a keyed POST inserts one row, and a retry \
replays it" "$tmp/calls.log"
echo "ok 14 - on PostgreSQL a keyed POST inserts one row, and a retry replays it"

post pg-2 '{"text":"world"}' HTTP_X_IDEMFCGI_FAULT=after-handler \
	>"$tmp/killed.out" 2>&1
before=$(pgsql 'SELECT COUNT(*) FROM notes')
i=0
until retry=$(post pg-2 '{"text":"world"}') &&
    echo "$retry" | grep -q '^Status: 201'; do
	i=$((i + 1))
	[ $i -gt 100 ] && break
	sleep 0.1
done
again=$(post pg-2 '{"text":"world"}')
rows=$(pgsql 'SELECT text, COUNT(*) FROM notes GROUP BY text ORDER BY text')
{ cat "$tmp/killed.out"; echo "rows after the kill: $before"; echo "$retry"
  echo "$again"; echo "rows: $rows"; cat "$tmp/server.log"; } >"$tmp/calls.log"
[ "$before" = 1 ] &&
echo "$retry" | grep -q '"text":"world"' &&
echo "$again" | grep -q 'Idempotent-Replayed: true' &&
[ "$rows" = "$(printf 'hello\t1\nworld\t1')" ] ||
	fail 15 "on PostgreSQL a worker killed before the COMMIT leaves no \
row; the retry inserts once" "$tmp/calls.log"
echo "ok 15 - on PostgreSQL a worker killed before the COMMIT leaves no row; the retry inserts once"

stop_server
sed -n '/^\[idempotency\]/,$p' "$tmp/idemfcgi-postgres.conf" \
	>"$tmp/skeleton-postgres.conf"
IDEMFCGI=$bin sh "$tmp/things/test.sh" "$tmp/things/skeleton.so" \
	"$tmp/skeleton-postgres.conf" >"$tmp/skeleton-test.log" 2>&1
rc=$?
rows=$(pgsql 'SELECT name, COUNT(*) FROM skeleton_things GROUP BY name')
echo "rows: $rows" >>"$tmp/skeleton-test.log"
[ $rc = 0 ] && [ "$rows" = "$(printf 'first\t1')" ] ||
	fail 16 "on PostgreSQL the skeleton's test passes and makes one row" \
	    "$tmp/skeleton-test.log"
echo "ok 16 - on PostgreSQL the skeleton's test passes and makes one row"
