#!/bin/sh
# TAP: the Prometheus alerting rules (conf/prometheus/idemfcgi-rules.yml),
# checked by the real tool: promtool (Debian package prometheus, installed
# by scripts/deps) checks them and runs their unit tests
# (tests/prometheus/idemfcgi-rules.test.yml).  Every alert has a case where
# it fires and one where it must not, a severity, a summary and a
# description naming its runbook entry, which docs/operations.md has.
# That the rules name only exported metrics is tests/e2e/test_monitoring.c.
set -u
s=${IDEM_SRCDIR:?}
rules="$s/conf/prometheus/idemfcgi-rules.yml"
tests="$s/tests/prometheus/idemfcgi-rules.test.yml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo 1..5

if command -v promtool >/dev/null 2>&1; then
	echo "ok 1 - promtool is installed"
else
	echo "not ok 1 - promtool is installed (Debian package prometheus: scripts/deps)"
fi

# the whole output: a lint problem fails too
if promtool check rules --lint=all --lint-fatal "$rules" >"$tmp/out" 2>&1; then
	echo "ok 2 - promtool check rules accepts the rules"
else
	echo "not ok 2 - promtool check rules accepts the rules"
	sed 's/^/# /' "$tmp/out"
fi

if promtool test rules "$tests" >"$tmp/out" 2>&1; then
	echo "ok 3 - promtool test rules passes"
else
	echo "not ok 3 - promtool test rules passes"
	sed 's/^/# /' "$tmp/out"
fi

# the alerts, and per alert: "fires" when a case expects it, "quiet" when
# a case expects nothing ("exp_alerts: []")
sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\) *$/\1/p' "$rules" >"$tmp/alerts"
awk '/^ *alertname:/ { name = $2 }
	/^ *exp_alerts: *\[\] *$/ { print name, "quiet"; next }
	/^ *exp_alerts: *$/ { print name, "fires" }' "$tests" |
	sort -u >"$tmp/cases"
: >"$tmp/missing"
while read -r a; do
	grep -qx "$a fires" "$tmp/cases" ||
		echo "$a: no case where it fires" >>"$tmp/missing"
	grep -qx "$a quiet" "$tmp/cases" ||
		echo "$a: no case where it must not fire" >>"$tmp/missing"
done <"$tmp/alerts"
if [ -s "$tmp/alerts" ] && [ ! -s "$tmp/missing" ]; then
	echo "ok 4 - every alert has a case where it fires and one where it must not"
else
	echo "not ok 4 - every alert has a case where it fires and one where it must not"
	[ -s "$tmp/alerts" ] || echo "no alert found in $rules" >>"$tmp/missing"
	sed 's/^/# /' "$tmp/missing"
fi

# each alert's block on one line: "- alert: NAME ... " up to the next one
awk '/^ *- alert:/ { if (b != "") print b; b = "" }
	/^ *- alert:/, 0 { $1 = $1; b = b " " $0 }
	END { if (b != "") print b }' "$rules" >"$tmp/blocks"
: >"$tmp/bad"
while read -r a; do
	b=$(grep -- "- alert: $a " "$tmp/blocks")
	echo "$b" | grep -Eq " severity: (critical|warning|info) " ||
		echo "$a: no severity critical, warning or info" >>"$tmp/bad"
	echo "$b" | grep -q " summary: " ||
		echo "$a: no summary" >>"$tmp/bad"
	echo "$b" | grep -q "Runbook: docs/operations.md, section 1, $a\." ||
		echo "$a: the description names no runbook entry" >>"$tmp/bad"
	grep -q "^#### \`$a\`" "$s/docs/operations.md" ||
		echo "$a: docs/operations.md has no entry \"#### \`$a\`\"" >>"$tmp/bad"
done <"$tmp/alerts"
if [ -s "$tmp/alerts" ] && [ ! -s "$tmp/bad" ]; then
	echo "ok 5 - every alert has a severity, a summary and a runbook entry"
else
	echo "not ok 5 - every alert has a severity, a summary and a runbook entry"
	sed 's/^/# /' "$tmp/bad"
fi
