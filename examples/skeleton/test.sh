#!/bin/sh
# The skeleton's test (TAP): runs PLUGIN.so in an installed idemfcgi and
# calls it over FastCGI with cgi-fcgi (libfcgi-bin), as a web server
# mounted at /api would (SCRIPT_NAME /api, PATH_INFO /things).
#
#   sh test.sh ./skeleton.so [MORE.conf]
#
# MORE.conf is appended to the config (an [idempotency] store = mysql and
# its [mysql] section, to run it on the MySQL store).  IDEMFCGI names the
# idemfcgi program (default: the one on PATH).
set -u
plugin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
more=${2:-}
bin=${IDEMFCGI:-idemfcgi}
tmp=$(mktemp -d /tmp/skeleton-test.XXXXXX)
pid=
finish() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap finish EXIT
n=0 failed=0
check() {   # check DESCRIPTION COMMAND...: one TAP line
	n=$((n + 1))
	what=$1
	shift
	if "$@"; then
		echo "ok $n - $what"
	else
		echo "not ok $n - $what"
		failed=1
	fi
}
has() { printf '%s\n' "$1" | tr -d '\r' | grep -q -- "$2"; }

{
	printf '[server]\nlisten = unix:%s/sock\nplugins = %s\n' "$tmp" \
	    "$plugin"
	printf '[skeleton]\nmax-name = 16\n'
	[ -n "$more" ] && cat "$more"
} >"$tmp/idemfcgi.conf"
"$bin" -c "$tmp/idemfcgi.conf" 2>"$tmp/log" &
pid=$!
i=0
while [ ! -S "$tmp/sock" ] && [ $i -lt 200 ] && kill -0 "$pid" 2>/dev/null; do
	sleep 0.05
	i=$((i + 1))
done
echo 1..6
check "idemfcgi serves the plugin" test -S "$tmp/sock"
[ -S "$tmp/sock" ] || { sed 's/^/# /' "$tmp/log"; exit 1; }

# call METHOD PATH BODY [VAR=VALUE...]: the answer on stdout
call() {
	m=$1 p=$2 body=$3
	shift 3
	printf '%s' "$body" | env -i REQUEST_METHOD="$m" \
	    REQUEST_URI="/api$p" SCRIPT_NAME=/api PATH_INFO="$p" \
	    CONTENT_TYPE=application/json CONTENT_LENGTH=${#body} "$@" \
	    cgi-fcgi -bind -connect "$tmp/sock"
}
key=skeleton-$$-$(date +%s)
first=$(call POST /things '{"name":"first"}' HTTP_IDEMPOTENCY_KEY="$key")
id=$(printf '%s\n' "$first" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
made() {
	has "$first" "^Status: 201" && [ -n "$id" ] &&
	    has "$first" "^Location: /api/things/$id\$"
}
check "POST /things answers 201 with its Location under the mount" made
again=$(call POST /things '{"name":"first"}' HTTP_IDEMPOTENCY_KEY="$key")
replayed() {
	has "$again" "^Idempotent-Replayed: true" &&
	    has "$again" "^Location: /api/things/$id\$" &&
	    has "$again" "\"id\":$id,"
}
check "a retry with the same key replays the 201, Location and all" replayed
got=$(call GET "/things/$id" '')
check "GET reads the one thing made" has "$got" "\"name\":\"first\""
other=$(call POST /things '{"name":"other"}' HTTP_IDEMPOTENCY_KEY="$key")
check "the same key with another body is a conflict" \
    has "$other" "IDEMPOTENCY_CONFLICT"
none=$(call POST /things '{"name":"first"}')
check "a POST without a key is refused" has "$none" "IDEMPOTENCY_KEY_MISSING"
[ $failed = 0 ] || { echo "# idemfcgi said:"; sed 's/^/# /' "$tmp/log"; }
exit $failed
