/*
 * idem_config_value.c - the types of value of the core sections' keys:
 * strings, numbers, sizes, durations, enumerations, lists, listen
 * addresses, modes, mount paths, statuses, scopes and secret files, each
 * parsed and checked against its row (idem_config_value.h).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "idem_config_value.h"
#include "idem_secret.h"
#include "idem_log.h"

const char idem_key_oom[] = "out of memory";

/* Replaces the string at *slot with a copy of v.  Returns NULL or
 * idem_key_oom. */
static const char *
set_string(char **slot, const char *v)
{
	char *copy = strdup(v);

	if (copy == NULL)
		return idem_key_oom;
	free(*slot);
	*slot = copy;
	return NULL;
}

/* Frees the string field. */
static void
release_string(const idem_key_arg *a)
{
	free(*(char **)a->field);
	*(char **)a->field = NULL;
}

/* Any text but an empty one.  Returns NULL or why not. */
static const char *
parse_string(const idem_key_arg *a, const char *v)
{
	if (*v == '\0')
		return "an empty value";
	return set_string(a->field, v);
}

/* A yes/no word.  Returns NULL or why not. */
static const char *
parse_bool(const idem_key_arg *a, const char *v)
{
	if (idem_parse_bool(v, a->field) != IDEM_OK)
		return IDEM_PARSE_BOOL_WANT;
	return NULL;
}

/* A whole number in the row's range, into *out.  Returns NULL or why
 * not. */
static const char *
whole_number(const idem_key_arg *a, const char *v, long long *out)
{
	long long min = (long long)a->def->min, max = (long long)a->def->max;

	if (idem_parse_int(v, min, max, out) != IDEM_OK)
		return idem_parse_int_want(min, max, a->why, a->whysize);
	return NULL;
}

/* A whole number into an unsigned.  Returns NULL or why not. */
static const char *
parse_uint(const idem_key_arg *a, const char *v)
{
	long long ll;
	const char *why = whole_number(a, v, &ll);

	if (why == NULL)
		*(unsigned *)a->field = (unsigned)ll;
	return why;
}

/* A whole number into a uint64_t.  Returns NULL or why not. */
static const char *
parse_u64(const idem_key_arg *a, const char *v)
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
set_in_range(const idem_key_arg *a, uint64_t u, const char *unit1,
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
parse_size(const idem_key_arg *a, const char *v)
{
	uint64_t u;

	if (idem_parse_size(v, &u) != IDEM_OK)
		return IDEM_PARSE_SIZE_WANT;
	return set_in_range(a, u, "", " bytes");
}

/* A duration in the row's range, in ms.  Returns NULL or why not. */
static const char *
parse_duration(const idem_key_arg *a, const char *v)
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
parse_enum(const idem_key_arg *a, const char *v)
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
release_words(const idem_key_arg *a)
{
	free_words(a->field, a->aux);
}

/* Words separated by blanks or commas (plugins), a continuation line
 * adding more.  Returns NULL or idem_key_oom. */
static const char *
parse_words(const idem_key_arg *a, const char *v)
{
	if (!a->continued)
		free_words(a->field, a->aux);
	if (append_words(a->field, a->aux, v) != IDEM_OK)
		return idem_key_oom;
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
parse_headers(const idem_key_arg *a, const char *v)
{
	char ***list = a->field;
	size_t *n = a->aux, i;

	if (!a->continued)
		free_words(list, n);
	i = *n;
	if (append_words(list, n, v) != IDEM_OK)
		return idem_key_oom;
	for (; i < *n; i++)
		if (!is_token((*list)[i]) || strlen((*list)[i]) > 128) {
			snprintf(a->why, a->whysize, "\"%.64s\" is not a header "
			    "name (an HTTP token such as X-Trace-Id)",
			    (*list)[i]);
			return a->why;
		}
	return NULL;
}

/* Whether p is a JSON Pointer (RFC 6901) to a member: "/" then reference
 * tokens separated by "/", where "~" is only "~0" or "~1".  Returns 1 or
 * 0. */
static int
is_pointer(const char *p)
{
	if (*p != '/')
		return 0;
	for (; *p != '\0'; p++)
		if (*p == '~' && p[1] != '0' && p[1] != '1')
			return 0;
	return 1;
}

/* The most JSON Pointers of one route. */
#define MAX_POINTERS 64

/* JSON Pointers (RFC 6901) such as /client_ts /meta/nonce, each at most
 * 255 bytes, separated by blanks or commas, a continuation line adding
 * more.  Returns NULL or why not. */
static const char *
parse_pointers(const idem_key_arg *a, const char *v)
{
	char ***list = a->field;
	size_t *n = a->aux, i;

	if (!a->continued)
		free_words(list, n);
	i = *n;
	if (append_words(list, n, v) != IDEM_OK)
		return idem_key_oom;
	if (*n == 0)
		return "at least one JSON Pointer is needed (/name)";
	if (*n > MAX_POINTERS)
		return "more than 64 JSON Pointers";
	for (; i < *n; i++)
		if (!is_pointer((*list)[i]) || strlen((*list)[i]) > 255) {
			snprintf(a->why, a->whysize, "\"%.64s\" is not a JSON "
			    "Pointer to a member (RFC 6901: /name, /a/b, with ~0 "
			    "for ~ and ~1 for /)", (*list)[i]);
			return a->why;
		}
	return NULL;
}

/* Frees a list of address blocks (the field) and empties its count
 * (aux). */
static void
release_blocks(const idem_key_arg *a)
{
	free(*(idem_cidr **)a->field);
	*(idem_cidr **)a->field = NULL;
	*(size_t *)a->aux = 0;
}

/* Address blocks such as 127.0.0.1 10.0.0.0/8 ::1, or "any" (every IPv4
 * and IPv6 address), a continuation line adding more.  Returns NULL or
 * why not. */
static const char *
parse_blocks(const idem_key_arg *a, const char *v)
{
	idem_cidr **list = a->field;
	size_t *n = a->aux;
	char **words = NULL;
	size_t nwords = 0, i;
	const char *why = NULL;

	if (!a->continued)
		release_blocks(a);
	if (append_words(&words, &nwords, v) != IDEM_OK)
		why = idem_key_oom;
	for (i = 0; why == NULL && i < nwords; i++) {
		idem_cidr *grown = realloc(*list, (*n + 2) * sizeof(*grown));
		if (grown == NULL) {
			why = idem_key_oom;
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
parse_listen(const idem_key_arg *a, const char *v)
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
parse_servers(const idem_key_arg *a, const char *v, int sockets)
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
parse_hosts(const idem_key_arg *a, const char *v)
{
	return parse_servers(a, v, 0);
}

/* [mysql] socket: one or more absolute paths, in failover order. */
static const char *
parse_sockets(const idem_key_arg *a, const char *v)
{
	return parse_servers(a, v, 1);
}

/* An octal file mode such as 0660, into an unsigned.  Returns NULL or why
 * not. */
static const char *
parse_mode(const idem_key_arg *a, const char *v)
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
parse_mount(const idem_key_arg *a, const char *v)
{
	char **slot = a->field;
	size_t len = strlen(v);

	if (len > 0 && v[0] != '/')
		return "the mount prefix must start with '/'";
	while (len > 0 && v[len - 1] == '/')
		len--;
	free(*slot);
	if ((*slot = strndup(v, len)) == NULL)
		return idem_key_oom;
	return NULL;
}

/* A built-in route's path: absolute, visible ASCII without ?, #, { or },
 * at most 255 bytes; with the row's off, "off" or "" for none (NULL).
 * Returns NULL or why not. */
static const char *
parse_route_path(const idem_key_arg *a, const char *v)
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
parse_statuses(const idem_key_arg *a, const char *v)
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

/* commit-statuses as text into out (size bytes): "2xx 400 404", a whole
 * hundred as Nxx.  Returns out. */
char *
idem_statuses_text(const unsigned char *table, char *out, size_t size)
{
	size_t len = 0;
	int c, i;

	out[0] = '\0';
	for (c = 1; c <= 5; c++) {
		for (i = 0; i < 100 && table[c * 100 + i]; i++)
			;
		if (i == 100) {
			len += (size_t)snprintf(out + len, size > len ? size - len :
			    0, "%s%dxx", len > 0 ? " " : "", c);
			continue;
		}
		for (i = 0; i < 100; i++)
			if (table[c * 100 + i])
				len += (size_t)snprintf(out + len, size > len ?
				    size - len : 0, "%s%d", len > 0 ? " " : "",
				    c * 100 + i);
	}
	return out;
}

/* Frees the scope's header name (aux). */
static void
release_scope(const idem_key_arg *a)
{
	free(*(char **)a->aux);
	*(char **)a->aux = NULL;
}

/* [idempotency] scope: none, remote-user or header:NAME, the header name
 * into aux.  Returns NULL or why not. */
static const char *
parse_scope(const idem_key_arg *a, const char *v)
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
parse_secret_file(const idem_key_arg *a, const char *v)
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
release_secret(const idem_key_arg *a)
{
	idem_secret_free(*(idem_secret **)a->field);
	*(idem_secret **)a->field = NULL;
}

/* The types of value: parse, release, field size, list, aux. */
const idem_key_type
    idem_kt_string = { parse_string, release_string, sizeof(char *), 0, 0 },
    idem_kt_bool = { parse_bool, NULL, sizeof(int), 0, 0 },
    idem_kt_uint = { parse_uint, NULL, sizeof(unsigned), 0, 0 },
    idem_kt_u64 = { parse_u64, NULL, sizeof(uint64_t), 0, 0 },
    idem_kt_size = { parse_size, NULL, sizeof(uint64_t), 0, 0 },
    idem_kt_duration = { parse_duration, NULL, sizeof(uint64_t), 0, 0 },
    idem_kt_enum = { parse_enum, NULL, sizeof(int), 0, 0 },
    idem_kt_words = { parse_words, release_words, sizeof(char **), 1, 1 },
    idem_kt_headers = { parse_headers, release_words, sizeof(char **), 1, 1 },
    idem_kt_pointers = { parse_pointers, release_words, sizeof(char **), 1,
	1 },
    idem_kt_blocks = { parse_blocks, release_blocks,
	sizeof(idem_cidr *), 1, 1 },
    idem_kt_listen = { parse_listen, release_string, sizeof(char *), 0, 0 },
    idem_kt_hosts = { parse_hosts, release_string, sizeof(char *), 0, 0 },
    idem_kt_sockets = { parse_sockets, release_string, sizeof(char *), 0, 0 },
    idem_kt_mode = { parse_mode, NULL, sizeof(unsigned), 0, 0 },
    idem_kt_mount = { parse_mount, release_string, sizeof(char *), 0, 0 },
    idem_kt_route_path = { parse_route_path, release_string, sizeof(char *), 0,
	0 },
    idem_kt_statuses = { parse_statuses, NULL, 600, 0, 0 },
    idem_kt_secret = { parse_secret_file, release_secret,
	sizeof(idem_secret *),
	0, 0 },
    idem_kt_scope = { parse_scope, release_scope, sizeof(int), 0, 1 };
