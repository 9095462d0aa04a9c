#!/bin/sh
# The framework's layers (README.md, DESIGN.md section 1): each folder of
# framework/ may include headers of its own folder and of the folders
# below it, never above.  The order, bottom first:
#
#   base  config  http  store  store/mysql  protocol  observe  plugin
#   server  programs
#
# and the public API (framework/idemfcgi.h, idemfcgi_mysql.h) under them
# all.  MySQL's client headers (<mysql.h>, <errmsg.h>, <mysqld_error.h>),
# or a header that includes them (idem_mysql.h, idem_store_mysql_int.h,
# idemfcgi_mysql.h), are included under store/mysql/ only, and in the raw
# public header itself; NOT_NEUTRAL lists the files that still name the
# MySQL pool: the plugin API's own (idem_app_mysql_pool, the loader's
# table of the raw API's functions) until a store-neutral data API for
# plugins lands (issue 36), each a known debt that may only shrink.
#
# usage: check-layers.sh [FRAMEWORK_DIR]   (default: $IDEM_SRCDIR/framework)
# TAP on stdout; exits 1 when a file breaks a rule, naming it.
set -eu
fw=${1:-${IDEM_SRCDIR:?}/framework}
LAYERS="base config http store store/mysql protocol observe plugin server
programs"
MYSQL_HEADERS="mysql.h errmsg.h mysqld_error.h idem_mysql.h
idem_store_mysql_int.h idemfcgi_mysql.h"
NOT_NEUTRAL="plugin/idem_app.c plugin/idem_plugin.c"

# the rank of a folder (0 is the bottom), or nothing for an unknown one
rank_of() {
	r=0
	for l in $LAYERS; do
		[ "$l" = "$1" ] && { echo "$r"; return; }
		r=$((r + 1))
	done
}

# header name -> folder, for every header of the framework
map=$(mktemp)
trap 'rm -f "$map"' EXIT
for l in $LAYERS; do
	for h in "$fw/$l"/*.h; do
		[ -e "$h" ] && echo "$(basename "$h") $l"
	done
done > "$map"

status=0
n=0
report() {
	n=$((n + 1))
	echo "not ok $n - $1"
	status=1
}

# every file in a layer: what it includes, against the order
for l in $LAYERS; do
	mine=$(rank_of "$l")
	for f in "$fw/$l"/*.c "$fw/$l"/*.h; do
		[ -e "$f" ] || continue
		rel=${f#"$fw"/}
		for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
			dir=$(awk -v h="$inc" '$1 == h { print $2; exit }' "$map")
			[ -n "$dir" ] || continue   # the public API, config.h
			theirs=$(rank_of "$dir")
			if [ "$theirs" -gt "$mine" ]; then
				report "$rel includes $inc, of $dir/, a layer above $l/"
			fi
		done
		case "$l" in store/mysql) continue ;; esac
		for inc in $(sed -n 's/^#include ["<]\([^">]*\)[">].*/\1/p' "$f"); do
			for m in $MYSQL_HEADERS; do
				[ "$inc" = "$m" ] || continue
				case " $(echo $NOT_NEUTRAL) " in
				*" $rel "*) ;;
				*) report "$rel includes $inc: MySQL's headers belong in store/mysql/" ;;
				esac
			done
		done
	done
done
# a debt paid is struck from the list: a file of NOT_NEUTRAL that no
# longer includes MySQL's headers must leave it
for rel in $NOT_NEUTRAL; do
	found=0
	for m in $MYSQL_HEADERS; do
		grep -q "^#include [\"<]$m[\">]" "$fw/$rel" 2>/dev/null && found=1
	done
	[ "$found" -eq 1 ] ||
	    report "$rel is in NOT_NEUTRAL but includes no MySQL header: strike it"
done
# the public API: the neutral header names no MySQL type
if grep -q '^#include <mysql.h>' "$fw/idemfcgi.h"; then
	report "idemfcgi.h includes <mysql.h>: only idemfcgi_mysql.h may"
fi
# a file outside every layer (the root holds the public API only)
for f in "$fw"/*.c; do
	[ -e "$f" ] && report "${f#"$fw"/} is in no layer's folder"
done
for f in "$fw"/*.h; do
	case "$(basename "$f")" in
	idemfcgi.h|idemfcgi_mysql.h) ;;
	*) [ -e "$f" ] && report "${f#"$fw"/} is in no layer's folder" ;;
	esac
done
if [ "$status" -eq 0 ]; then
	echo "1..1"
	echo "ok 1 - every folder of the framework includes only its own and the layers below"
else
	echo "1..$n"
fi
exit "$status"
