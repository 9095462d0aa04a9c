#!/bin/sh
# tests/layers/check-layers.sh finds what it must: each scenario plants
# one violation in a copy of framework/ and expects the check to fail
# naming it; the tree as it is passes.
set -eu
: "${IDEM_SRCDIR:?}"
check=$IDEM_SRCDIR/tests/layers/check-layers.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
status=0

# scenario NAME EXPECTED-TEXT SHELL-COMMANDS-THAT-PLANT-IT (in $tree)
scenario() {
	n=$((n + 1))
	tree=$tmp/$n
	cp -R "$IDEM_SRCDIR/framework" "$tree"
	# a tree unpacked read-only (make distcheck) is planted in all the same
	chmod -R u+w "$tree"
	(cd "$tree" && eval "$3")
	if "$check" "$tree" > "$tmp/out.$n" 2>&1; then
		echo "not ok $n - $1: the check passed"
		status=1
	elif grep -q "$2" "$tmp/out.$n"; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1: the check failed without naming it"
		sed 's/^/# /' "$tmp/out.$n"
		status=1
	fi
}

echo "1..13"
n=1
if "$check" "$IDEM_SRCDIR/framework" > "$tmp/out.0" 2>&1; then
	echo "ok 1 - the tree as it is passes"
else
	echo "not ok 1 - the tree as it is fails"
	sed 's/^/# /' "$tmp/out.0"
	status=1
fi
scenario "base including http" "base/idem_time.c includes idem_router.h" \
    'sed -i "s/#include \"idem_time.h\"/&\n#include \"idem_router.h\"/" base/idem_time.c'
scenario "the store interface including its MySQL store" \
    "store/idem_store.c includes idem_store_mysql.h" \
    'sed -i "s/#include \"idem_store.h\"/&\n#include \"idem_store_mysql.h\"/" store/idem_store.c'
scenario "<mysql.h> outside store/mysql/" \
    "protocol/idem_key.c includes mysql.h" \
    'sed -i "s/#include \"idem_key.h\"/&\n#include <mysql.h>/" protocol/idem_key.c'
scenario "a file outside every layer" "idem_stray.c is in no layer" \
    'echo "int x;" > idem_stray.c'
scenario "a debt paid but still listed" \
    "plugin/idem_plugin.c is in NOT_NEUTRAL but includes no MySQL header" \
    'sed -i "/#include \"idem_mysql.h\"/d; /#include \"idemfcgi_mysql.h\"/d" plugin/idem_plugin.c'
scenario "an include written with a path" \
    "base/idem_time.c includes ../http/idem_router.h" \
    'sed -i "s|#include \"idem_time.h\"|&\n# include \"../http/idem_router.h\"|" base/idem_time.c'
scenario "MySQL's headers by another name" \
    "protocol/idem_key.c includes mysql/mysql.h" \
    'sed -i "s|#include \"idem_key.h\"|&\n#include <mysql/mysql.h>|" protocol/idem_key.c'
scenario "the master knowing the MySQL store again" \
    "server/idem_master.c includes idem_store_mysql.h" \
    'sed -i "s|#include \"idem_master.h\"|&\n#include \"idem_store_mysql.h\"|" server/idem_master.c'
scenario "<libpq-fe.h> outside store/postgres/" \
    "protocol/idem_key.c includes libpq-fe.h: PostgreSQL belongs" \
    'sed -i "s/#include \"idem_key.h\"/&\n#include <libpq-fe.h>/" protocol/idem_key.c'
scenario "a store including the protocol above it" \
    "store/postgres/idem_pg.c includes idem_lease.h, of protocol/, a layer above store/postgres/" \
    'sed -i "s/#include \"idem_pg.h\"/&\n#include \"idem_lease.h\"/" store/postgres/idem_pg.c'
scenario "one store knowing another" \
    "store/mysql/idem_mysql.c includes idem_pg.h" \
    'sed -i "s/#include \"idem_mysql.h\"/&\n#include \"idem_pg.h\"/" store/mysql/idem_mysql.c'
scenario "a folder in no layer" "store/pg/ is in no layer" \
    'mkdir store/pg && echo "int x;" > store/pg/idem_store_pg.c'
exit "$status"
