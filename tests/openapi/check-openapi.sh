#!/bin/sh
# TAP: the OpenAPI 3.1 document of idemfcgi --openapi, of the demo's
# config (scripts/demo: the ledger) and of the testkit's (with a [route]
# section), validated by a real linter: @redocly/cli lint with its
# recommended rules must find no error.  The Iceberg catalog's document
# names its schemas as the Iceberg REST spec does.  scripts/deps installs the pinned
# @redocly/cli with npm into /opt/idemfcgi-redocly (IDEM_REDOCLY names
# another redocly).  jq checks what the document says of idempotency.
set -u
b=${IDEM_BUILDDIR:?}
s=${IDEM_SRCDIR:?}
redocly=${IDEM_REDOCLY:-/opt/idemfcgi-redocly/node_modules/.bin/redocly}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# no telemetry, no update check: the lint needs no network
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
export REDOCLY_TELEMETRY REDOCLY_SUPPRESS_UPDATE_NOTICE
echo 1..11

if [ -x "$redocly" ] && "$redocly" --version >"$tmp/version" 2>&1; then
	echo "ok 1 - @redocly/cli is installed ($(tail -n 1 "$tmp/version"))"
else
	echo "not ok 1 - @redocly/cli is installed at $redocly (scripts/deps installs it with npm)"
fi

# the demo's config, as scripts/demo writes it (memory store)
cat >"$tmp/demo.conf" <<CONF
[server]
listen = unix:$tmp/demo.sock
socket-mode = 0600
threads = 4
plugins = $b/.libs/ledger.so

[idempotency]
store = memory
required = false

[metrics]
enabled = true
CONF
cat >"$tmp/testkit.conf" <<CONF
[server]
listen = 127.0.0.1:1
mount = /api
plugins = $b/tests/testkit/.libs/testkit.so $b/.libs/ledger.so
[idempotency]
conflict-status = 422
scope = header:X-Api-Key
[testkit]
log = /dev/null
[route POST /testkit/echo]
key-format = uuidv7
lifetime = 7d
[route POST /testkit/fail]
policy = off
CONF

n=2
for c in demo testkit; do
	if "$b/idemfcgi" --openapi -c "$tmp/$c.conf" >"$tmp/$c.json" \
	    2>"$tmp/$c.err" && jq -e .openapi "$tmp/$c.json" >/dev/null; then
		echo "ok $n - idemfcgi --openapi writes the $c document"
	else
		echo "not ok $n - idemfcgi --openapi writes the $c document"
		sed 's/^/# /' "$tmp/$c.err"
	fi
	n=$((n + 1))
	if "$redocly" lint "$tmp/$c.json" >"$tmp/$c.lint" 2>&1; then
		echo "ok $n - redocly lint finds no error in the $c document"
	else
		echo "not ok $n - redocly lint finds no error in the $c document"
		sed 's/^/# /' "$tmp/$c.lint"
	fi
	n=$((n + 1))
done

# what the testkit document says: each answer is the framework's own
t="$tmp/testkit.json"
echo_op='.paths["/testkit/echo"].post'
fail=""
check() {
	jq -e "$1" "$t" >/dev/null 2>&1 || fail="$fail
$1"
}
check '.openapi == "3.1.0" and .servers[0].url == "/api"'
check "$echo_op"'.parameters[] | select(.name == "Idempotency-Key" and .in == "header" and .required == true and (.schema.pattern | test("-7\\[")) and ."x-idempotency-key-lifetime" == "PT168H")'
check "$echo_op"'.summary | test("execution id")'
check "$echo_op"'.requestBody.content["application/json"].schema.type == "object"'
check "$echo_op"'.responses["2XX"].headers["Idempotent-Replayed"]["$ref"] == "#/components/headers/Idempotent-Replayed"'
check "$echo_op"'.responses["422"].content["application/problem+json"].schema.allOf[1].properties.code.enum == ["IDEMPOTENCY_CONFLICT", "IDEMPOTENCY_KEY_EXPIRED"]'
check "$echo_op"'.responses["409"].content["application/problem+json"].schema.allOf[1].properties.code.enum == ["IDEMPOTENCY_IN_FLIGHT"]'
check "$echo_op"'.responses["409"].headers["Retry-After"]'
check "$echo_op"'.responses["400"].content["application/problem+json"].schema.allOf[1].properties.code.enum == ["IDEMPOTENCY_KEY_MISSING", "IDEMPOTENCY_KEY_INVALID", "IDEMPOTENCY_SCOPE_MISSING"]'
check "$echo_op"'.responses["413"].content["application/problem+json"].schema.allOf[1].properties.code.enum == ["BODY_TOO_LARGE"]'
check "$echo_op"'.responses["503"].content["application/problem+json"].schema.allOf[1].properties.code.enum == ["IDEMPOTENCY_STORE_UNAVAILABLE", "IDEMPOTENCY_OUTCOME_UNKNOWN"]'
check "$echo_op"'."x-idempotency" | .policy == "required" and ."key-format" == "uuidv7"'
check '.paths["/testkit/status/{code}"].post.parameters[] | select(.name == "code" and .in == "path" and .required == true)'
check '[.paths["/testkit/status/{code}"].post.parameters[] | select(.name == "Idempotency-Key")][0]."x-idempotency-key-lifetime" == "PT24H"'
check '[.paths["/testkit/fail"].post.parameters[]? | select(.name == "Idempotency-Key")] == []'
check '.paths["/testkit/fail"].post.responses["503"] == null'
check '[.paths["/testkit/read"].get.parameters[]? | select(.name == "Idempotency-Key")] == []'
check '.paths["/idempotency"] == null'
# the built-in route a client asks a key's state with (scope is set)
check '.paths["/idempotency/keys/{key}"].get | .operationId == "idemfcgi_key_status" and (.responses["200"].content["application/json"].schema.properties.state.enum | index("expired") != null)'
# the demo: required = false, so the key is optional on the ledger's
t="$tmp/demo.json"
check '[.paths[][] | .parameters[]? | select(.name == "Idempotency-Key") | .required] | length > 0 and all(. == false)'
if [ -z "$fail" ]; then
	echo "ok 6 - the document gives each route's key, replay header and problem answers"
else
	echo "not ok 6 - the document gives each route's key, replay header and problem answers"
	echo "$fail" | sed '/^$/d; s/^/# failed: /'
fi

# a config refused: no document, exit status 1
printf '[server]\nthreads = none\n' >"$tmp/bad.conf"
"$b/idemfcgi" --openapi -c "$tmp/bad.conf" >"$tmp/bad.json" 2>"$tmp/bad.err"
rc=$?
if [ $rc -eq 1 ] && [ ! -s "$tmp/bad.json" ] &&
    grep -q 'bad.conf:2: \[server\] threads' "$tmp/bad.err"; then
	echo "ok 7 - a refused config writes no document and exits 1"
else
	echo "not ok 7 - a refused config writes no document and exits 1 (got $rc)"
	sed 's/^/# /' "$tmp/bad.err"
fi
if "$b/idemfcgi" --openapi --check -c "$tmp/demo.conf" >/dev/null 2>&1; then
	echo "not ok 8 - --openapi with --check is refused"
else
	echo "ok 8 - --openapi with --check is refused"
fi

# every code the document gives is one the framework answers with
: >"$tmp/unknown"
jq -r '.. | objects | .enum? // empty | .[]' "$tmp/testkit.json" |
    sort -u | grep -E '^[A-Z_]+$' >"$tmp/codes"
while read -r code; do
	grep -q "\"$code\"" "$s"/framework/protocol/idem_middleware*.c \
	    "$s"/framework/server/idem_service.c \
	    "$s"/framework/http/idem_request.c \
	    "$s"/framework/http/idem_response.c 2>/dev/null ||
		echo "$code" >>"$tmp/unknown"
done <"$tmp/codes"
if [ -s "$tmp/codes" ] && [ ! -s "$tmp/unknown" ]; then
	echo "ok 9 - every problem code of the document is one idemfcgi answers ($(wc -l <"$tmp/codes") codes)"
else
	echo "not ok 9 - every problem code of the document is one idemfcgi answers"
	sed 's/^/# not answered anywhere: /' "$tmp/unknown"
fi

# the Iceberg catalog: its document lints, and every schema it names is a
# schema of the Iceberg REST spec (apache/iceberg,
# open-api/rest-catalog-open-api.yaml: the names below are the spec's
# components/schemas that a catalog of namespaces and tables uses)
spec_names="CatalogConfig CommitTableRequest CommitTableResponse
CommitTransactionRequest CreateNamespaceRequest CreateNamespaceResponse
CreateTableRequest ErrorModel GetNamespaceResponse IcebergErrorResponse
ListNamespacesResponse ListTablesResponse LoadTableResult Namespace
PageToken RegisterTableRequest RenameTableRequest ReportMetricsRequest
TableIdentifier TableMetadata TableRequirement TableUpdate
UpdateNamespacePropertiesRequest UpdateNamespacePropertiesResponse"
cat >"$tmp/iceberg.conf" <<CONF
[server]
listen = 127.0.0.1:1
path-source = request-uri
plugins = $b/.libs/iceberg.so
[idempotency]
required = false
lifetime = 30m
[iceberg]
warehouse = $tmp/warehouse
CONF
t="$tmp/iceberg.json"
if "$b/idemfcgi" --openapi -c "$tmp/iceberg.conf" >"$t" 2>"$tmp/iceberg.err" &&
    "$redocly" lint "$t" >"$tmp/iceberg.lint" 2>&1; then
	echo "ok 10 - redocly lint finds no error in the Iceberg catalog's document"
else
	echo "not ok 10 - redocly lint finds no error in the Iceberg catalog's document"
	sed 's/^/# /' "$tmp/iceberg.err" "$tmp/iceberg.lint" | tail -30
fi
fail=""
for name in $(jq -r '.components.schemas | keys[]' "$t" 2>/dev/null); do
	[ "$name" = Problem ] && continue
	echo "$spec_names" | tr ' ' '\n' | grep -qx "$name" ||
		fail="$fail
$name is not a schema of the Iceberg REST spec"
done
ops='.paths["/v1/namespaces"].post'
check "$ops"'.requestBody.content["application/json"].schema["$ref"] == "#/components/schemas/CreateNamespaceRequest"'
check "$ops"'.responses["2XX"].content["application/json"].schema["$ref"] == "#/components/schemas/CreateNamespaceResponse"'
check "$ops"'.parameters[] | select(.name == "Idempotency-Key" and .required == false and (.schema.pattern | test("-7\\[")) and ."x-idempotency-key-lifetime" == "PT30M")'
check "$ops"'.responses["409"].content["application/json"].schema["$ref"] == "#/components/schemas/IcebergErrorResponse"'
check "$ops"'.responses["409"].headers["Retry-After"]'
check '.paths["/v1/{prefix}/tables/rename"].post.requestBody.content["application/json"].schema["$ref"] == "#/components/schemas/RenameTableRequest"'
check '.paths["/v1/config"].get.responses["2XX"].content["application/json"].schema["$ref"] == "#/components/schemas/CatalogConfig"'
check '[.paths["/v1/namespaces/{namespace}/tables/{table}/metrics"].post.parameters[]? | select(.name == "Idempotency-Key")] == []'
check '.components.schemas.IcebergErrorResponse.properties.error["$ref"] == "#/components/schemas/ErrorModel"'
if [ -z "$fail" ] && [ -s "$t" ]; then
	echo "ok 11 - the catalog's schemas are the spec's, its errors the spec's error model"
else
	echo "not ok 11 - the catalog's schemas are the spec's, its errors the spec's error model"
	echo "$fail" | sed '/^$/d; s/^/# failed: /'
fi
