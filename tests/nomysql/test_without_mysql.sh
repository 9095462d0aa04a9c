#!/bin/sh
# TAP: a build without the MySQL store (./configure --without-mysql).
# store = mysql is refused with a reason, by --check and by a start; the
# installed SDK has idemfcgi_db.h and no raw MySQL header; examples/notes
# builds against it with pkg-config idemfcgi alone and serves from the
# memory store, a retried POST answered once; a plugin written against
# the raw MySQL API is refused with the reason.
set -u
b=${IDEM_BUILDDIR:?} s=${IDEM_SRCDIR:?}
tmp=$(mktemp -d /tmp/idemfcgi-nomysql.XXXXXX)
pid=''
finish() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap finish EXIT
fail() { echo "not ok $1 - $2"; sed 's/^/# /' "$3"; exit 1; }
echo 1..5

cat > "$tmp/mysql.conf" <<CONF
[idempotency]
store = mysql
[mysql]
user = idem
database = idem
CONF
"$b/idemfcgi" --check -c "$tmp/mysql.conf" >"$tmp/check.log" 2>&1 &&
	fail 1 "--check refuses store = mysql" "$tmp/check.log"
grep -q 'mysql.conf:2: \[idempotency\] store: store = mysql: this idemfcgi was built without the MySQL store (./configure --without-mysql)' \
	"$tmp/check.log" || fail 1 "--check says why store = mysql is refused" \
	"$tmp/check.log"
timeout 10 "$b/idemfcgi" -c "$tmp/mysql.conf" >"$tmp/start.log" 2>&1 &&
	fail 1 "a start with store = mysql fails" "$tmp/start.log"
grep -q 'built without the MySQL store' "$tmp/start.log" ||
	fail 1 "a start says why store = mysql is refused" "$tmp/start.log"
echo "ok 1 - store = mysql is refused, with the reason, by --check and a start"

make -C "$b" install DESTDIR="$tmp/root" >"$tmp/install.log" 2>&1 ||
	fail 2 "make install into a staging root" "$tmp/install.log"
inc=$(dirname "$(find "$tmp/root" -name idemfcgi.h)")
[ -f "$inc/idemfcgi_db.h" ] && [ ! -e "$inc/idemfcgi_mysql.h" ] &&
    [ -z "$(find "$tmp/root" -name idemfcgi-mysql.pc)" ] ||
	fail 2 "the SDK has idemfcgi_db.h, no idemfcgi_mysql.h nor idemfcgi-mysql.pc" \
	"$tmp/install.log"
echo "ok 2 - the SDK has idemfcgi_db.h, no idemfcgi_mysql.h nor idemfcgi-mysql.pc"

pc=$(find "$tmp/root" -name idemfcgi.pc)
mkdir "$tmp/pkgconfig"
prefix=$(sed -n 's/^prefix=//p' "$pc")
sed "s|^prefix=.*|prefix=$tmp/root$prefix|" "$pc" >"$tmp/pkgconfig/idemfcgi.pc"
export PKG_CONFIG_PATH="$tmp/pkgconfig"
cp -r "$s/examples/notes" "$tmp/notes"
chmod -R u+w "$tmp/notes"
rm -f "$tmp/notes/notes.so"
make -C "$tmp/notes" CFLAGS="-O2 -Wall -Wextra -Werror" >"$tmp/build.log" 2>&1 ||
	fail 3 "examples/notes builds with pkg-config idemfcgi alone" "$tmp/build.log"
echo "ok 3 - examples/notes builds with pkg-config idemfcgi alone"

export LD_LIBRARY_PATH
LD_LIBRARY_PATH=$(pkg-config --variable=libdir idemfcgi)
bin=$(find "$tmp/root" -path '*/bin/idemfcgi')
cat > "$tmp/notes.conf" <<CONF
[server]
listen = unix:$tmp/idemfcgi.sock
plugins = $tmp/notes/notes.so
CONF
"$bin" -c "$tmp/notes.conf" 2>"$tmp/server.log" &
pid=$!
i=0
while [ ! -S "$tmp/idemfcgi.sock" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
post() {
	printf '%s' "$2" | env -i REQUEST_METHOD=POST REQUEST_URI=/notes \
	    CONTENT_LENGTH=${#2} HTTP_IDEMPOTENCY_KEY="$1" \
	    cgi-fcgi -bind -connect "$tmp/idemfcgi.sock"
}
first=$(post note-1 '{"text":"hello"}')
again=$(post note-1 '{"text":"hello"}')
other=$(post note-2 '{"text":"world"}')
printf '%s\n---\n%s\n---\n%s\n' "$first" "$again" "$other" >"$tmp/answers"
case "$first" in *'"id":1'*) ;; *) fail 4 "the first POST makes note 1" "$tmp/answers" ;; esac
case "$again" in *'"id":1'*) ;; *) fail 4 "its retry is answered with note 1" "$tmp/answers" ;; esac
case "$other" in *'"id":2'*) ;; *) fail 4 "another key makes note 2" "$tmp/answers" ;; esac
echo "ok 4 - examples/notes serves from the memory store, a retry answered once"

# a plugin of the raw MySQL API, built as an outside one is: its setup
# calls idem_app_mysql_pool, which this server does not have
cat > "$tmp/raw.c" <<'C'
#include "idemfcgi.h"
void *idem_app_mysql_pool(idem_app *, const char *const *, unsigned long);
static idem_err
setup(idem_app *app, void **data)
{
	static const char *const q[] = { "SELECT 1" };
	(void)data;
	return idem_app_mysql_pool(app, q, 1) != 0 ? IDEM_OK : IDEM_ERR_STORE;
}
IDEM_PLUGIN("raw", setup, NULL, NULL)
C
cc -shared -fPIC $(pkg-config --cflags idemfcgi) -o "$tmp/raw.so" \
    "$tmp/raw.c" >"$tmp/raw.log" 2>&1 || fail 5 "the raw plugin builds" "$tmp/raw.log"
cat > "$tmp/raw.conf" <<CONF
[server]
plugins = $tmp/raw.so
CONF
"$bin" --check -c "$tmp/raw.conf" >"$tmp/raw.log" 2>&1 &&
	fail 5 "--check refuses a plugin of the raw MySQL API" "$tmp/raw.log"
grep -q "cannot load: .*undefined symbol: idem_app_mysql_pool (the plugin uses the raw MySQL API" \
    "$tmp/raw.log" || fail 5 "the refusal names the raw MySQL API" "$tmp/raw.log"
echo "ok 5 - a plugin of the raw MySQL API is refused, with the reason"
