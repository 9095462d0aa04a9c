/*
 * idem_config_keys.c - the keys of [server], [idempotency], [metrics] and
 * [mysql]: one table of rows, the value types its rows name, and the names
 * of the config's enumerations.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "idem_config_keys.h"
#include "idem_downstream.h"
#include "idem_log.h"

/* ------------------------------------------------ names of enumerations */

const char *const idem_key_format_names[IDEM_KEY__MAX] = {
	[IDEM_KEY_OPAQUE] = "opaque",
	[IDEM_KEY_UUID] = "uuid",
	[IDEM_KEY_UUIDV7] = "uuidv7",
};

const char *const idem_scope_names[IDEM_SCOPE__MAX] = {
	[IDEM_SCOPE_NONE] = "none",
	[IDEM_SCOPE_REMOTE_USER] = "remote-user",
	[IDEM_SCOPE_HEADER] = "header",
};

const char *const idem_store_names[IDEM_STORE__MAX] = {
	[IDEM_STORE_MEMORY] = "memory",
	[IDEM_STORE_MYSQL] = "mysql",
};

/* An enumeration's field is set as an int. */
_Static_assert(sizeof(idem_key_format) == sizeof(int) &&
    sizeof(idem_scope_kind) == sizeof(int) &&
    sizeof(idem_store_kind) == sizeof(int) &&
    sizeof(idem_log_level) == sizeof(int), "enums are ints");

/* ------------------------------------------------------ the value types */

typedef struct key_def key_def;

/* What a value parser gets. */
typedef struct key_arg {
	idem_config *cfg;
	const key_def *def;     /* the row */
	void *field;            /* its field in cfg */
	void *aux;              /* its second field, or NULL */
	int continued;          /* the value continues the key's last line */
	char *why;              /* room for a message */
	size_t whysize;
} key_arg;

/* How one type of value is parsed, checked and freed. */
typedef struct key_type {
	/* Sets the field from v.  Returns NULL or why v is bad. */
	const char *(*parse)(const key_arg *a, const char *v);
	/* Frees what the field owns; NULL when it owns nothing. */
	void (*release)(const key_arg *a);
	size_t size;            /* the size of the field */
	int list;               /* a continuation line adds to the value */
	int aux;                /* it needs the row's second field */
} key_type;

/* One key. */
struct key_def {
	const char *section;
	const char *key;
	const key_type *type;
	size_t offset;          /* of the field in idem_config */
	size_t size;            /* of that field, checked against the type */
	size_t aux;             /* a second field: a list's count, the
	                         * scope's header name (0: none) */
	uint64_t min, max;      /* the range of a number, size or duration */
	const char *const *names; /* an enumeration's names (max + 1) */
	int nocase;             /* the names in any case */
	int off;                /* "off" or empty sets the field to NULL */
	const char *def;        /* the default as text; NULL: none (the
	                         * field stays 0 or NULL) */
};

static const char oom[] = "out of memory";

/* Replaces the string at *slot with a copy of v.  Returns NULL or oom. */
static const char *
set_string(char **slot, const char *v)
{
	char *copy = strdup(v);

	if (copy == NULL)
		return oom;
	free(*slot);
	*slot = copy;
	return NULL;
}

/* Frees the string field. */
static void
release_string(const key_arg *a)
{
	free(*(char **)a->field);
	*(char **)a->field = NULL;
}

/* Any text but an empty one.  Returns NULL or why not. */
static const char *
parse_string(const key_arg *a, const char *v)
{
	if (*v == '\0')
		return "an empty value";
	return set_string(a->field, v);
}

/* A yes/no word.  Returns NULL or why not. */
static const char *
parse_bool(const key_arg *a, const char *v)
{
	if (idem_parse_bool(v, a->field) != IDEM_OK)
		return IDEM_PARSE_BOOL_WANT;
	return NULL;
}

/* A whole number in the row's range, into *out.  Returns NULL or why
 * not. */
static const char *
whole_number(const key_arg *a, const char *v, long long *out)
{
	long long min = (long long)a->def->min, max = (long long)a->def->max;

	if (idem_parse_int(v, min, max, out) != IDEM_OK)
		return idem_parse_int_want(min, max, a->why, a->whysize);
	return NULL;
}

/* A whole number into an unsigned.  Returns NULL or why not. */
static const char *
parse_uint(const key_arg *a, const char *v)
{
	long long ll;
	const char *why = whole_number(a, v, &ll);

	if (why == NULL)
		*(unsigned *)a->field = (unsigned)ll;
	return why;
}

/* A whole number into a uint64_t.  Returns NULL or why not. */
static const char *
parse_u64(const key_arg *a, const char *v)
{
	long long ll;
	const char *why = whole_number(a, v, &ll);

	if (why == NULL)
		*(uint64_t *)a->field = (uint64_t)ll;
	return why;
}

/* Stores u (a size or a duration) when it is in the row's range.  Returns
 * NULL, or "must be from MIN<unit1> to MAX<unit2>". */
static const char *
set_in_range(const key_arg *a, uint64_t u, const char *unit1,
    const char *unit2)
{
	if (u < a->def->min || u > a->def->max) {
		snprintf(a->why, a->whysize, "must be from %llu%s to %llu%s",
		    (unsigned long long)a->def->min, unit1,
		    (unsigned long long)a->def->max, unit2);
		return a->why;
	}
	*(uint64_t *)a->field = u;
	return NULL;
}

/* A size in bytes in the row's range.  Returns NULL or why not. */
static const char *
parse_size(const key_arg *a, const char *v)
{
	uint64_t u;

	if (idem_parse_size(v, &u) != IDEM_OK)
		return IDEM_PARSE_SIZE_WANT;
	return set_in_range(a, u, "", " bytes");
}

/* A duration in the row's range, in ms.  Returns NULL or why not. */
static const char *
parse_duration(const key_arg *a, const char *v)
{
	uint64_t u;

	if (idem_parse_duration(v, &u) != IDEM_OK)
		return IDEM_PARSE_DURATION_WANT;
	return set_in_range(a, u, "ms", "ms");
}

/* Finds v among the n names of an enumeration (in any case with nocase).
 * Returns its index, or -1 with "expected a, b or c" in why[size]. */
static int
name_index(const char *const *names, size_t n, const char *v, int nocase,
    char *why, size_t size)
{
	size_t i, len;

	for (i = 0; i < n; i++)
		if ((nocase ? strcasecmp(v, names[i]) : strcmp(v, names[i]))
		    == 0)
			return (int)i;
	len = (size_t)snprintf(why, size, "expected");
	for (i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(why + len, size - len, "%s%s",
		    i == 0 ? " " : i + 1 < n ? ", " : " or ", names[i]);
	return -1;
}

/* One of the row's names, into an int (the enum).  Returns NULL or why
 * not. */
static const char *
parse_enum(const key_arg *a, const char *v)
{
	int i = name_index(a->def->names, (size_t)a->def->max + 1, v,
	    a->def->nocase, a->why, a->whysize);

	if (i < 0)
		return a->why;
	*(int *)a->field = i;
	return NULL;
}

/* Splits a list value on white space and commas into new strings appended
 * to the NULL-terminated *list of *n.  Returns IDEM_OK or IDEM_ERR_NOMEM. */
static idem_err
append_words(char ***list, size_t *n, const char *value)
{
	const char *p = value;

	while (*p != '\0') {
		size_t len;
		char **grown;

		while (*p != '\0' && (isspace((unsigned char)*p) || *p == ','))
			p++;
		len = strcspn(p, " \t,");
		if (len == 0)
			break;
		grown = realloc(*list, (*n + 2) * sizeof(char *));
		if (grown == NULL)
			return IDEM_ERR_NOMEM;
		*list = grown;
		if ((grown[*n] = strndup(p, len)) == NULL)
			return IDEM_ERR_NOMEM;
		grown[++*n] = NULL;
		p += len;
	}
	return IDEM_OK;
}

/* Frees a NULL-terminated list of n strings and empties it. */
static void
free_words(char ***list, size_t *n)
{
	size_t i;

	for (i = 0; i < *n; i++)
		free((*list)[i]);
	free(*list);
	*list = NULL;
	*n = 0;
}

/* Frees a list of words (the field) and its count (aux). */
static void
release_words(const key_arg *a)
{
	free_words(a->field, a->aux);
}

/* Words separated by blanks or commas (plugins), a continuation line
 * adding more.  Returns NULL or oom. */
static const char *
parse_words(const key_arg *a, const char *v)
{
	if (!a->continued)
		free_words(a->field, a->aux);
	if (append_words(a->field, a->aux, v) != IDEM_OK)
		return oom;
	return NULL;
}

/* An HTTP token (RFC 9110), for header names. */
static int
is_token(const char *s)
{
	static const char extra[] = "!#$%&'*+-.^_`|~";

	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && strchr(extra, *s) == NULL)
			return 0;
	return 1;
}

/* Header names (HTTP tokens of up to 128 bytes, any case), a continuation
 * line adding more.  Returns NULL or why not. */
static const char *
parse_headers(const key_arg *a, const char *v)
{
	char ***list = a->field;
	size_t *n = a->aux, i;

	if (!a->continued)
		free_words(list, n);
	i = *n;
	if (append_words(list, n, v) != IDEM_OK)
		return oom;
	for (; i < *n; i++)
		if (!is_token((*list)[i]) || strlen((*list)[i]) > 128) {
			snprintf(a->why, a->whysize, "\"%.64s\" is not a header "
			    "name (an HTTP token such as X-Trace-Id)",
			    (*list)[i]);
			return a->why;
		}
	return NULL;
}

/* Frees a list of address blocks (the field) and empties its count
 * (aux). */
static void
release_blocks(const key_arg *a)
{
	free(*(idem_cidr **)a->field);
	*(idem_cidr **)a->field = NULL;
	*(size_t *)a->aux = 0;
}

/* Address blocks such as 127.0.0.1 10.0.0.0/8 ::1, or "any" (every IPv4
 * and IPv6 address), a continuation line adding more.  Returns NULL or
 * why not. */
static const char *
parse_blocks(const key_arg *a, const char *v)
{
	idem_cidr **list = a->field;
	size_t *n = a->aux;
	char **words = NULL;
	size_t nwords = 0, i;
	const char *why = NULL;

	if (!a->continued)
		release_blocks(a);
	if (append_words(&words, &nwords, v) != IDEM_OK)
		why = oom;
	for (i = 0; why == NULL && i < nwords; i++) {
		idem_cidr *grown = realloc(*list, (*n + 2) * sizeof(*grown));
		if (grown == NULL) {
			why = oom;
			break;
		}
		*list = grown;
		if (strcmp(words[i], "any") == 0) {
			idem_cidr_parse("0.0.0.0/0", &grown[(*n)++]);
			idem_cidr_parse("::/0", &grown[(*n)++]);
		} else if (idem_cidr_parse(words[i], &grown[*n]) == 0) {
			(*n)++;
		} else {
			why = "expected addresses or blocks such as 127.0.0.1 "
			    "10.0.0.0/8 ::1, or any";
		}
	}
	free_words(&words, &nwords);
	if (why == NULL && *n == 0)
		why = "at least one address is needed";
	return why;
}

/* [server] listen: "host:port", "[v6]:port" or "unix:/abs/path".  Returns
 * NULL or why not. */
static const char *
parse_listen(const key_arg *a, const char *v)
{
	const char *colon;
	long long port;

	if (strncmp(v, "unix:", 5) == 0) {
		if (v[5] != '/')
			return "a unix socket needs an absolute path (unix:/run/x.sock)";
		if (strlen(v + 5) >= 108)
			return "the unix socket path is longer than 107 bytes";
		return set_string(a->field, v);
	}
	colon = strrchr(v, ':');
	if (colon == NULL || colon == v)
		return "expected HOST:PORT or unix:/PATH";
	if (idem_parse_int(colon + 1, 0, 65535, &port) != IDEM_OK)
		return "the port must be a number from 0 to 65535";
	if (v[0] == '[' && colon[-1] != ']')
		return "an IPv6 address is written [ADDR]:PORT";
	return set_string(a->field, v);
}

/* A failover list of database servers (sockets: of socket paths), kept
 * as text for the pool, which splits it with the same parser.  Returns
 * NULL or why not. */
static const char *
parse_servers(const key_arg *a, const char *v, int sockets)
{
	idem_endpoint e[IDEM_ENDPOINTS_MAX];
	const char *why;
	size_t n;

	if (*v == '\0')
		return "an empty value";
	if ((why = idem_parse_endpoints(v, sockets, 3306, e, &n)) != NULL)
		return why;
	return set_string(a->field, v);
}

/* [mysql] host: one or more HOST[:PORT], in failover order. */
static const char *
parse_hosts(const key_arg *a, const char *v)
{
	return parse_servers(a, v, 0);
}

/* [mysql] socket: one or more absolute paths, in failover order. */
static const char *
parse_sockets(const key_arg *a, const char *v)
{
	return parse_servers(a, v, 1);
}

/* An octal file mode such as 0660, into an unsigned.  Returns NULL or why
 * not. */
static const char *
parse_mode(const key_arg *a, const char *v)
{
	long long mode;
	char *end;

	errno = 0;
	mode = strtoll(v, &end, 8);
	if (*v == '\0' || *end != '\0' || errno != 0 || mode < 0 ||
	    mode > 0777)
		return "expected an octal mode such as 0660";
	*(unsigned *)a->field = (unsigned)mode;
	return NULL;
}

/* [server] mount: "" or "/prefix", kept without trailing '/'.  Returns
 * NULL or why not. */
static const char *
parse_mount(const key_arg *a, const char *v)
{
	char **slot = a->field;
	size_t len = strlen(v);

	if (len > 0 && v[0] != '/')
		return "the mount prefix must start with '/'";
	while (len > 0 && v[len - 1] == '/')
		len--;
	free(*slot);
	if ((*slot = strndup(v, len)) == NULL)
		return oom;
	return NULL;
}

/* A built-in route's path: absolute, visible ASCII without ?, #, { or },
 * at most 255 bytes; with the row's off, "off" or "" for none (NULL).
 * Returns NULL or why not. */
static const char *
parse_route_path(const key_arg *a, const char *v)
{
	const char *p;

	if (a->def->off && (strcmp(v, "off") == 0 || *v == '\0')) {
		release_string(a);
		return NULL;
	}
	if (v[0] != '/')
		return "a path such as /metrics (it is under mount)";
	if (strlen(v) > 255)
		return "longer than 255 bytes";
	for (p = v; *p != '\0'; p++)
		if ((unsigned char)*p <= ' ' || *p == '?' || *p == '#' ||
		    *p == '{' || *p == '}' || (unsigned char)*p >= 0x7f)
			return "a path of visible ASCII, without ?, #, { or }";
	return set_string(a->field, v);
}

/* Statuses such as "2xx 400 404" into a table of 600 flags; 429 and 5xx
 * are refused.  Returns NULL or why not. */
static const char *
parse_statuses(const key_arg *a, const char *v)
{
	unsigned char *table = a->field;
	const char *p = v;
	int any = 0;

	memset(table, 0, 600);
	while (*p != '\0') {
		size_t len;

		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		len = strcspn(p, " \t,");
		if (len != 3 || p[0] < '1' || p[0] > '5')
			return "expected statuses such as 200 or 2xx (100 to 599)";
		if ((p[1] == 'x' || p[1] == 'X') && (p[2] == 'x' || p[2] == 'X')) {
			memset(table + (p[0] - '0') * 100, 1, 100);
		} else if (isdigit((unsigned char)p[1]) &&
		    isdigit((unsigned char)p[2])) {
			table[(p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0')] = 1;
		} else {
			return "expected statuses such as 200 or 2xx (100 to 599)";
		}
		any = 1;
		p += len;
	}
	if (!any)
		return "at least one status is needed";
	if (table[429] || table[500] || table[503])
		return "429 and 5xx are transient and must not be committed "
		    "(4xx includes 429: list 4xx statuses one by one)";
	return NULL;
}

/* Frees the scope's header name (aux). */
static void
release_scope(const key_arg *a)
{
	free(*(char **)a->aux);
	*(char **)a->aux = NULL;
}

/* [idempotency] scope: none, remote-user or header:NAME, the header name
 * into aux.  Returns NULL or why not. */
static const char *
parse_scope(const key_arg *a, const char *v)
{
	const char *header = idem_scope_names[IDEM_SCOPE_HEADER];
	size_t hlen = strlen(header);
	const char *why;
	int i;

	if (strncmp(v, header, hlen) == 0 && v[hlen] == ':') {
		v += hlen + 1;
		if (!is_token(v) || strlen(v) > 128) {
			snprintf(a->why, a->whysize, "%s:NAME needs an HTTP "
			    "header name", header);
			return a->why;
		}
		if ((why = set_string(a->aux, v)) != NULL)
			return why;
		*(int *)a->field = IDEM_SCOPE_HEADER;
		return NULL;
	}
	/* the names but the last, which takes a header name */
	if ((i = name_index(idem_scope_names, IDEM_SCOPE_HEADER, v, 0, a->why,
	    a->whysize)) < 0) {
		snprintf(a->why, a->whysize, "expected %s, %s or %s:NAME",
		    idem_scope_names[IDEM_SCOPE_NONE],
		    idem_scope_names[IDEM_SCOPE_REMOTE_USER], header);
		return a->why;
	}
	*(int *)a->field = i;
	return NULL;
}

/* A file holding a key secret (idem_secret_read), read now: the config
 * keeps the secret, not the path.  Returns NULL or why not. */
static const char *
parse_secret_file(const key_arg *a, const char *v)
{
	idem_secret **slot = a->field, *s;

	if (*v == '\0')
		return "an empty value";
	if (idem_secret_read(v, &s, a->why, a->whysize) != IDEM_OK)
		return a->why;
	idem_secret_free(*slot);
	*slot = s;
	return NULL;
}

/* Wipes and frees the secret field. */
static void
release_secret(const key_arg *a)
{
	idem_secret_free(*(idem_secret **)a->field);
	*(idem_secret **)a->field = NULL;
}

/* The types of value: parse, release, field size, list, aux. */
static const key_type
    t_string = { parse_string, release_string, sizeof(char *), 0, 0 },
    t_bool = { parse_bool, NULL, sizeof(int), 0, 0 },
    t_uint = { parse_uint, NULL, sizeof(unsigned), 0, 0 },
    t_u64 = { parse_u64, NULL, sizeof(uint64_t), 0, 0 },
    t_size = { parse_size, NULL, sizeof(uint64_t), 0, 0 },
    t_duration = { parse_duration, NULL, sizeof(uint64_t), 0, 0 },
    t_enum = { parse_enum, NULL, sizeof(int), 0, 0 },
    t_words = { parse_words, release_words, sizeof(char **), 1, 1 },
    t_headers = { parse_headers, release_words, sizeof(char **), 1, 1 },
    t_blocks = { parse_blocks, release_blocks, sizeof(idem_cidr *), 1, 1 },
    t_listen = { parse_listen, release_string, sizeof(char *), 0, 0 },
    t_hosts = { parse_hosts, release_string, sizeof(char *), 0, 0 },
    t_sockets = { parse_sockets, release_string, sizeof(char *), 0, 0 },
    t_mode = { parse_mode, NULL, sizeof(unsigned), 0, 0 },
    t_mount = { parse_mount, release_string, sizeof(char *), 0, 0 },
    t_route_path = { parse_route_path, release_string, sizeof(char *), 0,
	0 },
    t_statuses = { parse_statuses, NULL, 600, 0, 0 },
    t_secret = { parse_secret_file, release_secret, sizeof(idem_secret *),
	0, 0 },
    t_scope = { parse_scope, release_scope, sizeof(int), 0, 1 };

/* ------------------------------------------------------------ the table */

/* The field f of idem_config: where it is and its size. */
#define FIELD(f) .offset = offsetof(idem_config, f), \
	.size = sizeof(((idem_config *)0)->f)
#define DAY_MS (86400000ULL)

static const key_def keys[] = {
	{ "server", "listen", &t_listen, FIELD(listen) },
	{ "server", "socket-mode", &t_mode, FIELD(socket_mode),
	    .def = "0660" },
	{ "server", "workers", &t_uint, FIELD(workers), .min = 1, .max = 256,
	    .def = "1" },
	{ "server", "threads", &t_uint, FIELD(threads), .min = 1, .max = 1024,
	    .def = "8" },
	{ "server", "max-connections", &t_uint, FIELD(max_connections),
	    .min = 1, .max = 65536, .def = "1024" },
	{ "server", "allow-clients", &t_blocks, FIELD(allow_clients),
	    .aux = offsetof(idem_config, nallow_clients),
	    .def = "127.0.0.0/8 ::1" },
	{ "server", "max-body", &t_size, FIELD(max_body), .min = 0,
	    .max = 1ULL << 31, .def = "1m" },
	{ "server", "max-headers", &t_uint, FIELD(max_headers), .min = 1,
	    .max = 10000, .def = "100" },
	{ "server", "max-header-size", &t_size, FIELD(max_header_size),
	    .min = 64, .max = 1ULL << 20, .def = "8k" },
	{ "server", "max-params-size", &t_size, FIELD(max_params_size),
	    .min = 1024, .max = 16ULL << 20, .def = "64k" },
	{ "server", "mount", &t_mount, FIELD(mount), .def = "" },
	{ "server", "plugins", &t_words, FIELD(plugins),
	    .aux = offsetof(idem_config, nplugins) },
	{ "server", "shutdown-grace", &t_duration, FIELD(shutdown_grace),
	    .min = 0, .max = 3600000, .def = "30s" },
	{ "server", "log-level", &t_enum, FIELD(log_level),
	    .names = idem_log_level_names, .max = IDEM_LOG__MAX - 1,
	    .nocase = 1, .def = "info" },
	{ "server", "log-format", &t_enum, FIELD(log_json),
	    .names = idem_log_format_names, .max = IDEM_LOG_FORMAT__MAX - 1,
	    .def = "text" },
	{ "server", "policy-path", &t_route_path, FIELD(policy_path),
	    .off = 1, .def = "/idempotency" },
	{ "server", "ping-path", &t_route_path, FIELD(ping_path), .off = 1 },
	{ "server", "ready-path", &t_route_path, FIELD(ready_path), .off = 1 },
	{ "server", "slow-request", &t_duration, FIELD(slow_request),
	    .min = 0, .max = 86400000, .def = "0" },

	{ "idempotency", "enabled", &t_bool, FIELD(idem_enabled),
	    .def = "true" },
	{ "idempotency", "store", &t_enum, FIELD(store),
	    .names = idem_store_names, .max = IDEM_STORE__MAX - 1,
	    .def = "memory" },
	{ "idempotency", "key-format", &t_enum, FIELD(key_format),
	    .names = idem_key_format_names, .max = IDEM_KEY__MAX - 1,
	    .def = "opaque" },
	{ "idempotency", "required", &t_bool, FIELD(required), .def = "true" },
	{ "idempotency", "lifetime", &t_duration, FIELD(lifetime),
	    .min = 1000, .max = 3650 * DAY_MS, .def = "24h" },
	{ "idempotency", "inflight-ttl", &t_duration, FIELD(inflight_ttl),
	    .min = 100, .max = DAY_MS, .def = "30s" },
	{ "idempotency", "inflight-wait", &t_duration, FIELD(inflight_wait),
	    .min = 0, .max = 600000, .def = "0" },
	{ "idempotency", "commit-statuses", &t_statuses, FIELD(commit_status),
	    .def = "2xx 400 404 409 422" },
	{ "idempotency", "conflict-status", &t_uint, FIELD(conflict_status),
	    .min = 400, .max = 499, .def = "409" },
	{ "idempotency", "scope", &t_scope, FIELD(scope),
	    .aux = offsetof(idem_config, scope_header), .def = "none" },
	{ "idempotency", "max-entries", &t_u64, FIELD(max_entries), .min = 1,
	    .max = 100000000, .def = "100000" },
	{ "idempotency", "max-response", &t_size, FIELD(max_response),
	    .min = 0, .max = 16ULL << 20, .def = "1m" },
	{ "idempotency", "cleanup-interval", &t_duration,
	    FIELD(cleanup_interval), .min = 1000, .max = DAY_MS, .def = "5m" },
	{ "idempotency", "replay-omit-headers", &t_headers, FIELD(replay_omit),
	    .aux = offsetof(idem_config, nreplay_omit) },
	{ "idempotency", "key-secret-file", &t_secret, FIELD(key_secret) },

	{ "metrics", "enabled", &t_bool, FIELD(metrics_enabled),
	    .def = "false" },
	{ "metrics", "path", &t_route_path, FIELD(metrics_path),
	    .def = "/metrics" },
	{ "metrics", "allow", &t_blocks, FIELD(metrics_allow),
	    .aux = offsetof(idem_config, nmetrics_allow),
	    .def = "127.0.0.1 ::1" },
	{ "metrics", "status-path", &t_route_path, FIELD(status_path),
	    .off = 1 },

	{ "mysql", "host", &t_hosts, FIELD(mysql_host), .def = "127.0.0.1" },
	{ "mysql", "port", &t_uint, FIELD(mysql_port), .min = 1, .max = 65535,
	    .def = "3306" },
	{ "mysql", "socket", &t_sockets, FIELD(mysql_socket) },
	{ "mysql", "user", &t_string, FIELD(mysql_user) },
	{ "mysql", "password-file", &t_string, FIELD(mysql_password_file) },
	{ "mysql", "database", &t_string, FIELD(mysql_database) },
	{ "mysql", "pool-size", &t_uint, FIELD(mysql_pool_size), .min = 1,
	    .max = 1024, .def = "8" },
	{ "mysql", "connect-timeout", &t_duration,
	    FIELD(mysql_connect_timeout), .min = 1, .max = 3600000,
	    .def = "2s" },
	{ "mysql", "read-timeout", &t_duration, FIELD(mysql_read_timeout),
	    .min = 1000, .max = 3600000, .def = "5s" },
	{ "mysql", "write-timeout", &t_duration, FIELD(mysql_write_timeout),
	    .min = 1000, .max = 3600000, .def = "5s" },
	{ "mysql", "causal-reads", &t_bool, FIELD(mysql_causal_reads),
	    .def = "false" },
	{ "mysql", "failback", &t_duration, FIELD(mysql_failback),
	    .min = 1000, .max = 86400000, .def = "30s" },
	{ "mysql", "replay-cache", &t_size, FIELD(mysql_replay_cache),
	    .min = 0, .max = 1ULL << 40, .def = "8m" },
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))
_Static_assert(NKEYS <= IDEM_CONFIG_MAX_KEYS, "raise IDEM_CONFIG_MAX_KEYS");

/* ------------------------------------------------------ using the table */

/* The row of [section] key.  Returns its index or -1. */
int
idem_config_key_index(const char *section, const char *key)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].section, section) == 0 &&
		    strcmp(keys[i].key, key) == 0)
			return (int)i;
	return -1;
}

/* The key and section of row i, or NULL past the table. */
const char *
idem_config_key_at(size_t i, const char **section)
{
	if (i >= NKEYS)
		return NULL;
	*section = keys[i].section;
	return keys[i].key;
}

/* Whether row i is a list.  Returns 1 or 0 (also for no such row). */
int
idem_config_key_is_list(int i)
{
	return i >= 0 && (size_t)i < NKEYS && keys[i].type->list;
}

/* The i-th distinct section of the table, or NULL. */
const char *
idem_config_core_section(size_t i)
{
	size_t k, j;

	for (k = 0; k < NKEYS; k++) {
		for (j = 0; j < k; j++)
			if (strcmp(keys[j].section, keys[k].section) == 0)
				break;
		if (j == k && i-- == 0)
			return keys[k].section;
	}
	return NULL;
}

/* Whether name is a section of the table.  Returns 1 or 0. */
int
idem_config_is_core_section(const char *name)
{
	size_t i;

	for (i = 0; name != NULL && i < NKEYS; i++)
		if (strcmp(keys[i].section, name) == 0)
			return 1;
	return 0;
}

/* Fills *a for row i of cfg. */
static void
arg_of(key_arg *a, idem_config *cfg, int i, int continued, char *why,
    size_t size)
{
	const key_def *d = &keys[i];

	a->cfg = cfg;
	a->def = d;
	a->field = (char *)cfg + d->offset;
	a->aux = d->aux != 0 ? (char *)cfg + d->aux : NULL;
	a->continued = continued;
	a->why = why;
	a->whysize = size;
}

/* Parses v into row i.  Returns NULL or why not. */
const char *
idem_config_key_set(idem_config *cfg, int i, const char *v, int continued,
    char *why, size_t size)
{
	key_arg a;

	if (i < 0 || (size_t)i >= NKEYS)
		return "not a key of the table";
	arg_of(&a, cfg, i, continued, why, size);
	return keys[i].type->parse(&a, v);
}

/* Parses every row's default into cfg.  Returns IDEM_OK, IDEM_ERR_NOMEM or
 * IDEM_ERR_CONFIG (a bad row, logged). */
idem_err
idem_config_keys_defaults(idem_config *cfg)
{
	char why[256];
	const char *bad;
	size_t i;

	for (i = 0; i < NKEYS; i++) {
		const key_def *d = &keys[i];

		if (d->size != d->type->size || (d->type->aux && d->aux == 0) ||
		    (d->type == &t_enum && d->names == NULL)) {
			idem_config_error(cfg, 0, d->section, d->key, "the key "
			    "table gives a field of the wrong kind");
			return IDEM_ERR_CONFIG;
		}
		if (d->def == NULL)
			continue;
		bad = idem_config_key_set(cfg, (int)i, d->def, 0, why,
		    sizeof(why));
		if (bad == oom)
			return IDEM_ERR_NOMEM;
		if (bad != NULL) {
			idem_config_error(cfg, 0, d->section, d->key, "bad "
			    "default \"%s\": %s", d->def, bad);
			return IDEM_ERR_CONFIG;
		}
	}
	return IDEM_OK;
}

/* The line where [section] key was set (0: it was not). */
static unsigned
seen_line(const unsigned *seen, const char *section, const char *key)
{
	int i = idem_config_key_index(section, key);

	return i >= 0 ? seen[i] : 0;
}

/* Checks combinations of keys; each problem is logged. */
void
idem_config_keys_check(idem_config *cfg,
    const unsigned seen[IDEM_CONFIG_MAX_KEYS])
{
	if (cfg->workers > 1 && cfg->idem_enabled &&
	    cfg->store == IDEM_STORE_MEMORY)
		idem_config_error(cfg, seen_line(seen, "server", "workers"),
		    "server", "workers", "workers > 1 needs store = mysql: a "
		    "memory store is per process, and a retry that reaches "
		    "another worker would run again");
	if (cfg->max_connections < cfg->threads)
		idem_config_error(cfg, seen_line(seen, "server",
		    "max-connections") != 0 ? seen_line(seen, "server",
		    "max-connections") : seen_line(seen, "server", "threads"),
		    "server", "max-connections", "max-connections (%u) is below "
		    "threads (%u): threads beyond the connections would never "
		    "serve", cfg->max_connections, cfg->threads);
	if (cfg->metrics_enabled && cfg->policy_path != NULL &&
	    strcmp(cfg->metrics_path, cfg->policy_path) == 0)
		idem_config_error(cfg, seen_line(seen, "metrics", "path"),
		    "metrics", "path", "the same path as [server] policy-path");
	if (!cfg->metrics_enabled && cfg->status_path != NULL)
		idem_config_error(cfg, seen_line(seen, "metrics",
		    "status-path"), "metrics", "status-path", "the status route "
		    "reads the counters of [metrics]: set enabled = true");
	if (cfg->store == IDEM_STORE_MYSQL && cfg->idem_enabled) {
		unsigned line = seen_line(seen, "idempotency", "store");
		if (cfg->mysql_user == NULL)
			idem_config_error(cfg, line, "mysql", "user",
			    "store = mysql needs a user");
		if (cfg->mysql_database == NULL)
			idem_config_error(cfg, line, "mysql", "database",
			    "store = mysql needs a database");
	}
}

/* Frees what each row's field owns. */
void
idem_config_keys_free(idem_config *cfg)
{
	key_arg a;
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (keys[i].type->release != NULL) {
			arg_of(&a, cfg, (int)i, 0, NULL, 0);
			keys[i].type->release(&a);
		}
}
