#!/bin/sh
# The framework's layers (README.md, DESIGN.md section 1): each folder of
# framework/ may include headers of its own folder and of the folders
# below it, never above.  The order, bottom first:
#
#   base  config  http  store  store/mysql  store/postgres  store/redis
#   protocol  observe  plugin  server  programs
#
# and the public API (framework/idemfcgi.h, idemfcgi_db.h,
# idemfcgi_mysql.h) under them
# all, including none of them.  A folder that is not in this list is in
# no layer, and is refused until it is placed.
#
# A store is known only to the store factory (server/idem_store_open.c)
# and to its own folder (a store sits beside the others, none above
# another): a header of store/mysql/, or MySQL's client headers (mysql*.h,
# mysql/..., mariadb*, errmsg.h), is included under store/mysql/ only, by
# the factory, by the public raw header (idemfcgi_mysql.h), and by the
# files of NOT_NEUTRAL: the maker of the plugins' pools, which knows each
# store with a database (as the factory knows each store), and the
# loader's table of the raw API's functions; the list may only shrink.
# So too a header of store/postgres/, or libpq's (libpq-fe.h, libpq/...,
# pg_config*.h, postgres_ext.h): under store/postgres/ and by the factory
# only; and a header of store/redis/, or hiredis's (hiredis/...): under
# store/redis/ and by the factory only.
#
# An include is matched however it is written ("x.h", <x.h>, "../d/x.h",
# "# include"): by the file's name.
#
# usage: check-layers.sh [FRAMEWORK_DIR]   (default: $IDEM_SRCDIR/framework)
# TAP on stdout; exits 1 when a file breaks a rule, naming it.
set -eu
fw=${1:-${IDEM_SRCDIR:?}/framework}
LAYERS="base config http store store/mysql store/postgres store/redis
protocol observe plugin server programs"
FACTORY="server/idem_store_open.c"
NOT_NEUTRAL="plugin/idem_app_db.c plugin/idem_plugin.c"

# the rank of a folder (0 is the bottom), or nothing for an unknown one;
# the stores share one rank
rank_of() {
	r=0
	for l in $LAYERS; do
		[ "$l" = "$1" ] && { echo "$r"; return; }
		# store/mysql, store/postgres and the store after them share
		# a rank
		case "$l" in store/mysql|store/postgres) ;; *) r=$((r + 1)) ;; esac
	done
}

# the folder of the framework's header named $1, or nothing
folder_of() {
	awk -v h="$1" '$1 == h { print $2; exit }' "$map"
}

# what a file includes, one path a line, however it is written
includes() {
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^">]*\)[">].*/\1/p' "$1"
}

# whether include path $1 names MySQL: its client's headers, or the
# MySQL store's own
is_mysql() {
	name=${1##*/}
	case "$1" in
	mysql/*|mariadb/*) return 0 ;;
	esac
	case "$name" in
	mysql*.h|mariadb*.h|ma_*.h|errmsg.h|idemfcgi_mysql.h) return 0 ;;
	esac
	[ "$(folder_of "$name")" = "store/mysql" ]
}

# whether include path $1 names PostgreSQL: libpq's headers, or the
# PostgreSQL store's own
is_postgres() {
	name=${1##*/}
	case "$1" in
	libpq/*|postgresql/*) return 0 ;;
	esac
	case "$name" in
	libpq-fe.h|libpq-events.h|pg_config*.h|postgres_ext.h) return 0 ;;
	esac
	[ "$(folder_of "$name")" = "store/postgres" ]
}

# whether include path $1 names Redis: hiredis's headers, or the Redis
# store's own
is_redis() {
	case "$1" in
	hiredis/*|hiredis.h) return 0 ;;
	esac
	[ "$(folder_of "${1##*/}")" = "store/redis" ]
}

map=$(mktemp)
trap 'rm -f "$map"' EXIT
# header name -> folder, for every header of the framework's layers
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

# every folder is a layer
for d in $(cd "$fw" && find . -mindepth 1 -type d | sed 's|^\./||'); do
	[ -n "$(rank_of "$d")" ] ||
	    report "$d/ is in no layer: place it in LAYERS (and in the docs)"
done

# every file in a layer: what it includes, against the order
for l in $LAYERS; do
	mine=$(rank_of "$l")
	for f in "$fw/$l"/*.c "$fw/$l"/*.h; do
		[ -e "$f" ] || continue
		rel=${f#"$fw"/}
		for inc in $(includes "$f"); do
			name=${inc##*/}
			dir=$(folder_of "$name")
			if [ -n "$dir" ] &&
			    [ "$(rank_of "$dir")" -gt "$mine" ]; then
				report "$rel includes $inc, of $dir/, a layer above $l/"
			fi
			if [ "$l" != store/postgres ] && is_postgres "$inc"; then
				[ "$rel" = "$FACTORY" ] ||
				    report "$rel includes $inc: PostgreSQL belongs in store/postgres/ (and the store factory)"
			fi
			if [ "$l" != store/redis ] && is_redis "$inc"; then
				[ "$rel" = "$FACTORY" ] ||
				    report "$rel includes $inc: Redis belongs in store/redis/ (and the store factory)"
			fi
			case "$l" in store/mysql) continue ;; esac
			is_mysql "$inc" || continue
			case " $FACTORY $(echo $NOT_NEUTRAL) " in
			*" $rel "*) ;;
			*) report "$rel includes $inc: MySQL belongs in store/mysql/ (and the store factory)" ;;
			esac
		done
	done
done
# a debt paid is struck from the list: a file of NOT_NEUTRAL that no
# longer includes MySQL must leave it
for rel in $NOT_NEUTRAL; do
	found=0
	for inc in $(includes "$fw/$rel" 2>/dev/null); do
		is_mysql "$inc" && found=1
	done
	[ "$found" -eq 1 ] ||
	    report "$rel is in NOT_NEUTRAL but includes no MySQL header: strike it"
done
# the public API includes nothing of the framework's; only the raw
# header names MySQL
for h in idemfcgi.h idemfcgi_db.h idemfcgi_mysql.h; do
	for inc in $(includes "$fw/$h"); do
		name=${inc##*/}
		if [ -n "$(folder_of "$name")" ]; then
			report "$h includes $inc, a header of the framework's inside"
		fi
		if [ "$h" != idemfcgi_mysql.h ] && is_mysql "$inc"; then
			report "$h includes $inc: only idemfcgi_mysql.h may"
		fi
		if is_postgres "$inc" || is_redis "$inc"; then
			report "$h includes $inc: no public header may"
		fi
	done
done
# a file outside every layer (the root holds the public API only)
for f in "$fw"/*.c; do
	[ -e "$f" ] && report "${f#"$fw"/} is in no layer's folder"
done
for f in "$fw"/*.h; do
	case "$(basename "$f")" in
	idemfcgi.h|idemfcgi_db.h|idemfcgi_mysql.h) ;;
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
