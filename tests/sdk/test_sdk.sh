#!/bin/sh
# TAP: the plugin SDK.  Installs idemfcgi into a temporary staging root
# (make install DESTDIR=...), builds examples/notes there with nothing but
# the installed header, library and pkg-config file, loads it into the
# installed idemfcgi and calls it.
set -u
b=${IDEM_BUILDDIR:?} s=${IDEM_SRCDIR:?}
tmp=$(mktemp -d /tmp/idemfcgi-sdk.XXXXXX)
pid=
finish() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap finish EXIT
fail() { echo "not ok $1 - $2"; sed 's/^/# /' "$3"; exit 1; }
echo 1..4

make -C "$b" install DESTDIR="$tmp/root" >"$tmp/install.log" 2>&1 ||
	fail 1 "make install into a staging root" "$tmp/install.log"
pc=$(find "$tmp/root" -name idemfcgi.pc)
[ -n "$pc" ] || fail 1 "make install installs idemfcgi.pc" "$tmp/install.log"
echo "ok 1 - make install into a staging root"
# The staged .pc file names the configured prefix; a copy names the
# staging root instead.  (pkg-config --define-prefix would move the
# system's .pc files too: mysqlclient's -I/usr/include/mariadb would
# become -I/usr/lib/include/mariadb.)
mkdir "$tmp/pkgconfig"
prefix=$(sed -n 's/^prefix=//p' "$pc")
sed "s|^prefix=.*|prefix=$tmp/root$prefix|" "$pc" >"$tmp/pkgconfig/idemfcgi.pc"
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

"$bin" -c "$tmp/idemfcgi.conf" 2>"$tmp/server.log" &
pid=$!
i=0
while [ ! -S "$tmp/idemfcgi.sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
post() {
	printf '%s' "$2" | env -i REQUEST_METHOD=POST REQUEST_URI=/notes \
	    CONTENT_LENGTH=${#2} HTTP_IDEMPOTENCY_KEY="$1" \
	    cgi-fcgi -bind -connect "$tmp/idemfcgi.sock"
}
first=$(post note-1 '{"text":"hello"}')
again=$(post note-1 '{"text":"hello"}')
other=$(post note-2 '{"text":"world"}')
{ echo "$first"; echo "$again"; echo "$other"; cat "$tmp/server.log"; } >"$tmp/calls.log"
echo "$first" | grep -q '{"id":1,"text":"hello"}' &&
echo "$again" | grep -q 'Idempotent-Replayed: true' &&
echo "$again" | grep -q '{"id":1,"text":"hello"}' &&
echo "$other" | grep -q '{"id":2,"text":"world"}' ||
	fail 4 "the plugin answers, and a retry replays" "$tmp/calls.log"
echo "ok 4 - the plugin answers, and a retry replays"
