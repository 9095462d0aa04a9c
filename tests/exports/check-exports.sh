#!/bin/sh
# The dynamic symbols of libidemfcgi are exactly its API (jansson's
# check-exports): the list below, which must also be what idemfcgi.h,
# idemfcgi_db.h and idemfcgi_mysql.h mark IDEM_API, what idemfcgi exports
# to plugins and what debian/libidemfcgi1.symbols lists.  Adding a function to the API is a
# deliberate edit of this list, of the symbols file and of libidemfcgi's
# -version-info.  A build without the MySQL store exports the list less
# idemfcgi_mysql.h's functions.
set -eu
: "${IDEM_BUILDDIR:?}" "${IDEM_SRCDIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sort > "$tmp/expected" <<LIST
idem_app_db
idem_app_db_dialect
idem_app_db_exec
idem_app_error_format
idem_app_has_key_secret
idem_app_is_check
idem_app_mysql_exec
idem_app_mysql_pool
idem_app_schema
idem_app_uses_mysql
idem_config_bool
idem_config_duration
idem_config_int
idem_config_size
idem_config_string
idem_db_affected
idem_db_fetch
idem_db_get
idem_db_insert_id
idem_db_one
idem_db_put
idem_db_run
idem_log
idem_mysql_affected
idem_mysql_check
idem_mysql_fetch
idem_mysql_get
idem_mysql_insert_id
idem_mysql_one
idem_mysql_put
idem_mysql_run
idem_mysql_stmt
idem_request_body
idem_request_checkpoint
idem_request_db
idem_request_downstream_key
idem_request_header
idem_request_id
idem_request_json
idem_request_method
idem_request_param
idem_request_path
idem_request_phase
idem_request_progress
idem_request_query
idem_request_remote_user
idem_request_route
idem_request_script_name
idem_request_tx
idem_response_get_status
idem_response_header
idem_response_json
idem_response_problem
idem_response_status
idem_response_write
idem_route_add
idem_route_add_tx
idem_route_describe
idem_route_error_format
idem_route_lifetime
idem_route_reconcile
idem_route_set
idem_strerror
LIST

# The functions a header declares IDEM_API, a line each.
declared_in() {
	${CC:-cc} -fpreprocessed -dD -E -P "$IDEM_SRCDIR/framework/$1" |
		sed '/^#/d' | tr '\n' ' ' | tr ';' '\n' |
		grep 'IDEM_API [^(]*(' | sed 's/(.*//' | awk '{ print $NF }' |
		tr -d '*'
}

# A build without the MySQL store (./configure --without-mysql) has no
# raw MySQL API: the list less what idemfcgi_mysql.h declares.
headers="idemfcgi.h idemfcgi_db.h idemfcgi_mysql.h"
declared_in idemfcgi_mysql.h | sort > "$tmp/raw"
if [ "${IDEM_WITH_MYSQL:-yes}" = no ]; then
	headers="idemfcgi.h idemfcgi_db.h"
	comm -23 "$tmp/expected" "$tmp/raw" > "$tmp/less"
	mv "$tmp/less" "$tmp/expected"
fi

echo "1..4"
lib="$IDEM_BUILDDIR/.libs/libidemfcgi.so"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVWiu]$/ { print $3 }' |
	sort > "$tmp/exported"
if diff -u "$tmp/expected" "$tmp/exported" > "$tmp/diff"; then
	echo "ok 1 - libidemfcgi exports exactly the API"
else
	echo "not ok 1 - libidemfcgi's dynamic symbols differ from the API"
	sed 's/^/# /' "$tmp/diff"
fi

# every declaration marked IDEM_API: the headers without their comments
# (the compiler strips them, expanding nothing), one statement a line
for h in $headers; do
	declared_in "$h"
done | sort > "$tmp/declared"
if diff -u "$tmp/expected" "$tmp/declared" > "$tmp/diff"; then
	echo "ok 2 - the headers declare exactly the API"
else
	echo "not ok 2 - the headers' IDEM_API declarations differ from the API"
	sed 's/^/# /' "$tmp/diff"
fi

# the server exports the whole API to the plugins it loads (a program
# links only the objects of libidem it references)
nm -D --defined-only "$IDEM_BUILDDIR/idemfcgi" |
	awk '$2 ~ /^[TW]$/ && $3 ~ /^idem_/ { print $3 }' | sort > "$tmp/server"
if diff -u "$tmp/expected" "$tmp/server" > "$tmp/diff"; then
	echo "ok 3 - idemfcgi exports the whole API to its plugins"
else
	echo "not ok 3 - idemfcgi's exported API differs from the API"
	sed 's/^/# /' "$tmp/diff"
fi

# the Debian symbols file names the same functions (dpkg-gensymbols fails
# the package build on any difference; this finds it in make check)
sed -n 's/^ \(idem_[A-Za-z0-9_]*\)@Base .*/\1/p' \
	"$IDEM_SRCDIR/debian/libidemfcgi1.symbols" | sort > "$tmp/symbols"
if [ "${IDEM_WITH_MYSQL:-yes}" = no ]; then
	comm -23 "$tmp/symbols" "$tmp/raw" > "$tmp/less"
	mv "$tmp/less" "$tmp/symbols"
fi
if diff -u "$tmp/expected" "$tmp/symbols" > "$tmp/diff"; then
	echo "ok 4 - debian/libidemfcgi1.symbols lists exactly the API"
else
	echo "not ok 4 - debian/libidemfcgi1.symbols differs from the API"
	sed 's/^/# /' "$tmp/diff"
fi
