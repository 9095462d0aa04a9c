/*
 * idem_config.c - parsing and checking the INI configuration file.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "idem_config.h"
#include "idem_log.h"

/* ------------------------------------------------------- error reports */

void
idem_config_error(idem_config *cfg, unsigned line, const char *section,
    const char *key, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cfg->errors++;
	if (key != NULL)
		idem_log(NULL, IDEM_LOG_ERROR, "%s:%u: [%s] %s: %s", cfg->path,
		    line, section, key, msg);
	else if (section != NULL)
		idem_log(NULL, IDEM_LOG_ERROR, "%s:%u: [%s]: %s", cfg->path,
		    line, section, msg);
	else
		idem_log(NULL, IDEM_LOG_ERROR, "%s:%u: %s", cfg->path, line,
		    msg);
}

/* ------------------------------------------------------ the key table */

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

typedef enum key_kind {
	K_STRING,    /* char *, replaced */
	K_UINT,      /* unsigned, in [min, max] */
	K_U64,       /* uint64_t, in [min, max] */
	K_SIZE,      /* uint64_t bytes, in [min, max] */
	K_DURATION,  /* uint64_t ms, in [min, max] */
	K_BOOL,      /* int */
	K_SPECIAL    /* parsed by special() */
} key_kind;

typedef struct key_def {
	const char *section;
	const char *key;
	key_kind kind;
	size_t offset;
	uint64_t min;
	uint64_t max;
} key_def;

#define OFF(f) offsetof(idem_config, f)
#define DAY_MS (86400000ULL)

static const key_def keys[] = {
	{ "server", "listen", K_SPECIAL, OFF(listen), 0, 0 },
	{ "server", "socket-mode", K_SPECIAL, OFF(socket_mode), 0, 0 },
	{ "server", "workers", K_UINT, OFF(workers), 1, 256 },
	{ "server", "threads", K_UINT, OFF(threads), 1, 1024 },
	{ "server", "max-body", K_SIZE, OFF(max_body), 0, 1ULL << 31 },
	{ "server", "max-headers", K_UINT, OFF(max_headers), 1, 10000 },
	{ "server", "max-header-size", K_SIZE, OFF(max_header_size), 64,
	    1ULL << 20 },
	{ "server", "max-params-size", K_SIZE, OFF(max_params_size), 1024,
	    16ULL << 20 },
	{ "server", "mount", K_SPECIAL, OFF(mount), 0, 0 },
	{ "server", "plugins", K_SPECIAL, OFF(plugins), 0, 0 },
	{ "server", "shutdown-grace", K_DURATION, OFF(shutdown_grace), 0,
	    3600000 },
	{ "server", "log-level", K_SPECIAL, OFF(log_level), 0, 0 },
	{ "server", "log-format", K_SPECIAL, OFF(log_json), 0, 0 },
	{ "server", "policy-path", K_SPECIAL, OFF(policy_path), 0, 0 },

	{ "idempotency", "enabled", K_BOOL, OFF(idem_enabled), 0, 1 },
	{ "idempotency", "store", K_SPECIAL, OFF(store), 0, 0 },
	{ "idempotency", "key-format", K_SPECIAL, OFF(key_format), 0, 0 },
	{ "idempotency", "required", K_BOOL, OFF(required), 0, 1 },
	{ "idempotency", "lifetime", K_DURATION, OFF(lifetime), 1000,
	    3650 * DAY_MS },
	{ "idempotency", "inflight-ttl", K_DURATION, OFF(inflight_ttl), 100,
	    DAY_MS },
	{ "idempotency", "inflight-wait", K_DURATION, OFF(inflight_wait), 0,
	    600000 },
	{ "idempotency", "commit-statuses", K_SPECIAL, OFF(commit_status), 0,
	    0 },
	{ "idempotency", "conflict-status", K_UINT, OFF(conflict_status), 400,
	    499 },
	{ "idempotency", "scope", K_SPECIAL, OFF(scope), 0, 0 },
	{ "idempotency", "max-entries", K_U64, OFF(max_entries), 1,
	    100000000 },
	{ "idempotency", "max-response", K_SIZE, OFF(max_response), 0,
	    16ULL << 20 },
	{ "idempotency", "cleanup-interval", K_DURATION,
	    OFF(cleanup_interval), 1000, DAY_MS },
	{ "idempotency", "replay-omit-headers", K_SPECIAL, OFF(replay_omit),
	    0, 0 },

	{ "metrics", "enabled", K_BOOL, OFF(metrics_enabled), 0, 1 },
	{ "metrics", "path", K_SPECIAL, OFF(metrics_path), 0, 0 },
	{ "metrics", "allow", K_SPECIAL, OFF(metrics_allow), 0, 0 },

	{ "mysql", "host", K_STRING, OFF(mysql_host), 0, 0 },
	{ "mysql", "port", K_UINT, OFF(mysql_port), 1, 65535 },
	{ "mysql", "socket", K_STRING, OFF(mysql_socket), 0, 0 },
	{ "mysql", "user", K_STRING, OFF(mysql_user), 0, 0 },
	{ "mysql", "password-file", K_STRING, OFF(mysql_password_file), 0, 0 },
	{ "mysql", "database", K_STRING, OFF(mysql_database), 0, 0 },
	{ "mysql", "pool-size", K_UINT, OFF(mysql_pool_size), 1, 1024 },
	{ "mysql", "connect-timeout", K_DURATION, OFF(mysql_connect_timeout),
	    1, 3600000 },
	{ "mysql", "read-timeout", K_DURATION, OFF(mysql_read_timeout), 1000,
	    3600000 },
	{ "mysql", "write-timeout", K_DURATION, OFF(mysql_write_timeout), 1000,
	    3600000 },
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static int
is_core_section(const char *section)
{
	return strcmp(section, "server") == 0 ||
	    strcmp(section, "idempotency") == 0 ||
	    strcmp(section, "metrics") == 0 || strcmp(section, "mysql") == 0;
}

/* Splits a list value on white space and commas into a new NULL-terminated
 * array appended to *list.  Returns IDEM_OK or IDEM_ERR_NOMEM. */
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

/* Checks "host:port", "[v6]:port" or "unix:/abs/path". */
static const char *
check_listen(const char *v)
{
	const char *colon;
	long long port;

	if (strncmp(v, "unix:", 5) == 0) {
		if (v[5] != '/')
			return "a unix socket needs an absolute path (unix:/run/x.sock)";
		if (strlen(v + 5) >= 108)
			return "the unix socket path is longer than 107 bytes";
		return NULL;
	}
	colon = strrchr(v, ':');
	if (colon == NULL || colon == v)
		return "expected HOST:PORT or unix:/PATH";
	if (idem_parse_int(colon + 1, 0, 65535, &port) != IDEM_OK)
		return "the port must be a number from 0 to 65535";
	if (v[0] == '[' && colon[-1] != ']')
		return "an IPv6 address is written [ADDR]:PORT";
	return NULL;
}

/* Parses "2xx 400 404 ..." into a status table. */
static const char *
parse_statuses(const char *v, unsigned char table[600])
{
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

/* Parses [idempotency] replay-omit-headers: header names (HTTP tokens of
 * up to 128 bytes, any case), added to the list by a continuation line. */
static const char *
parse_omit(idem_config *cfg, const char *v, int continued)
{
	static char why[192];
	size_t i;

	if (!continued)
		free_words(&cfg->replay_omit, &cfg->nreplay_omit);
	i = cfg->nreplay_omit;
	if (append_words(&cfg->replay_omit, &cfg->nreplay_omit, v) != IDEM_OK)
		return "out of memory";
	for (; i < cfg->nreplay_omit; i++)
		if (!is_token(cfg->replay_omit[i]) ||
		    strlen(cfg->replay_omit[i]) > 128) {
			snprintf(why, sizeof(why), "\"%.64s\" is not a header "
			    "name (an HTTP token such as X-Trace-Id)",
			    cfg->replay_omit[i]);
			return why;
		}
	return NULL;
}

/* Parses [metrics] allow: address blocks, or "any". */
static const char *
parse_allow(idem_config *cfg, const char *v, int continued)
{
	char **words = NULL;
	size_t n = 0, i;
	const char *why = NULL;

	if (!continued) {
		free(cfg->metrics_allow);
		cfg->metrics_allow = NULL;
		cfg->nmetrics_allow = 0;
	}
	if (append_words(&words, &n, v) != IDEM_OK)
		why = "out of memory";
	for (i = 0; why == NULL && i < n; i++) {
		idem_cidr *grown = realloc(cfg->metrics_allow,
		    (cfg->nmetrics_allow + 2) * sizeof(*grown));
		if (grown == NULL) {
			why = "out of memory";
			break;
		}
		cfg->metrics_allow = grown;
		if (strcmp(words[i], "any") == 0) {
			idem_cidr_parse("0.0.0.0/0", &grown[cfg->nmetrics_allow++]);
			idem_cidr_parse("::/0", &grown[cfg->nmetrics_allow++]);
		} else if (idem_cidr_parse(words[i], &grown[cfg->nmetrics_allow])
		    == 0) {
			cfg->nmetrics_allow++;
		} else {
			why = "expected addresses or blocks such as 127.0.0.1 "
			    "10.0.0.0/8 ::1, or any";
		}
	}
	for (i = 0; i < n; i++)
		free(words[i]);
	free(words);
	if (why == NULL && cfg->nmetrics_allow == 0)
		why = "at least one address is needed";
	return why;
}

/* A built-in route's path: absolute, no white space or '?'.  Returns NULL
 * or why not. */
static const char *
check_route_path(const char *v)
{
	const char *p;

	if (v[0] != '/')
		return "a path such as /metrics (it is under mount)";
	if (strlen(v) > 255)
		return "longer than 255 bytes";
	for (p = v; *p != '\0'; p++)
		if ((unsigned char)*p <= ' ' || *p == '?' || *p == '#' ||
		    *p == '{' || *p == '}' || (unsigned char)*p >= 0x7f)
			return "a path of visible ASCII, without ?, #, { or }";
	return NULL;
}

/* Replaces the string at *slot with a copy of v. */
static idem_err
set_string(char **slot, const char *v)
{
	char *copy = strdup(v);

	if (copy == NULL)
		return IDEM_ERR_NOMEM;
	free(*slot);
	*slot = copy;
	return IDEM_OK;
}

/* Finds v among the n names of an enumeration (in any case with nocase).
 * Returns its index, or -1 with "expected a, b or c" in why. */
static int
name_index(const char *const *names, size_t n, const char *v, int nocase,
    char *why, size_t size)
{
	size_t i, len = 0;

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

/* Parses [idempotency] scope: none, remote-user or header:NAME.  Returns
 * NULL or why not (in why). */
static const char *
parse_scope(idem_config *cfg, const char *v, char *why, size_t size)
{
	const char *header = idem_scope_names[IDEM_SCOPE_HEADER];
	size_t hlen = strlen(header);
	int i;

	if (strncmp(v, header, hlen) == 0 && v[hlen] == ':') {
		v += hlen + 1;
		if (!is_token(v) || strlen(v) > 128) {
			snprintf(why, size, "%s:NAME needs an HTTP header name",
			    header);
			return why;
		}
		if (set_string(&cfg->scope_header, v) != IDEM_OK)
			return "out of memory";
		cfg->scope = IDEM_SCOPE_HEADER;
		return NULL;
	}
	/* the names but the last, which takes a header name */
	if ((i = name_index(idem_scope_names, IDEM_SCOPE_HEADER, v, 0, why,
	    size)) < 0) {
		snprintf(why, size, "expected %s, %s or %s:NAME",
		    idem_scope_names[IDEM_SCOPE_NONE],
		    idem_scope_names[IDEM_SCOPE_REMOTE_USER], header);
		return why;
	}
	cfg->scope = (idem_scope_kind)i;
	return NULL;
}

/* Parses a K_SPECIAL key.  Returns NULL or the message of a bad value. */
static const char *
special(idem_config *cfg, const key_def *d, const char *v, int continued)
{
	static char msg[192];
	long long mode;
	int i;

	if (strcmp(d->key, "listen") == 0) {
		const char *why = check_listen(v);
		if (why == NULL && set_string(&cfg->listen, v) != IDEM_OK)
			return "out of memory";
		return why;
	}
	if (strcmp(d->key, "socket-mode") == 0) {
		char *end;
		errno = 0;
		mode = strtoll(v, &end, 8);
		if (*v == '\0' || *end != '\0' || errno != 0 || mode < 0 ||
		    mode > 0777)
			return "expected an octal mode such as 0660";
		cfg->socket_mode = (unsigned)mode;
		return NULL;
	}
	if (strcmp(d->key, "mount") == 0) {
		size_t len = strlen(v);
		if (len > 0 && v[0] != '/')
			return "the mount prefix must start with '/'";
		while (len > 0 && v[len - 1] == '/')
			len--;
		free(cfg->mount);
		if ((cfg->mount = strndup(v, len)) == NULL)
			return "out of memory";
		return NULL;
	}
	if (strcmp(d->key, "plugins") == 0) {
		if (!continued)
			free_words(&cfg->plugins, &cfg->nplugins);
		if (append_words(&cfg->plugins, &cfg->nplugins, v) != IDEM_OK)
			return "out of memory";
		return NULL;
	}
	if (strcmp(d->key, "log-level") == 0) {
		if ((i = name_index(idem_log_level_names, IDEM_LOG__MAX, v, 1,
		    msg, sizeof(msg))) < 0)
			return msg;
		cfg->log_level = (idem_log_level)i;
		return NULL;
	}
	if (strcmp(d->key, "log-format") == 0) {
		if ((i = name_index(idem_log_format_names,
		    IDEM_LOG_FORMAT__MAX, v, 0, msg, sizeof(msg))) < 0)
			return msg;
		cfg->log_json = i == IDEM_LOG_JSON;
		return NULL;
	}
	if (strcmp(d->key, "policy-path") == 0 ||
	    strcmp(d->key, "path") == 0) {
		char **slot = (char **)((char *)cfg + d->offset);
		const char *why;
		if (slot == &cfg->policy_path && (strcmp(v, "off") == 0 ||
		    *v == '\0')) {
			free(cfg->policy_path);
			cfg->policy_path = NULL;
			return NULL;
		}
		if ((why = check_route_path(v)) != NULL)
			return why;
		return set_string(slot, v) == IDEM_OK ? NULL : "out of memory";
	}
	if (strcmp(d->key, "allow") == 0)
		return parse_allow(cfg, v, continued);
	if (strcmp(d->key, "store") == 0) {
		if ((i = name_index(idem_store_names, IDEM_STORE__MAX, v, 0,
		    msg, sizeof(msg))) < 0)
			return msg;
		cfg->store = (idem_store_kind)i;
		return NULL;
	}
	if (strcmp(d->key, "key-format") == 0) {
		if ((i = name_index(idem_key_format_names, IDEM_KEY__MAX, v, 0,
		    msg, sizeof(msg))) < 0)
			return msg;
		cfg->key_format = (idem_key_format)i;
		return NULL;
	}
	if (strcmp(d->key, "commit-statuses") == 0)
		return parse_statuses(v, cfg->commit_status);
	if (strcmp(d->key, "replay-omit-headers") == 0)
		return parse_omit(cfg, v, continued);
	if (strcmp(d->key, "scope") == 0)
		return parse_scope(cfg, v, msg, sizeof(msg));
	return "no parser for this key";
}

/* Parses one core key.  Returns NULL or the message of a bad value. */
static const char *
set_core(idem_config *cfg, const key_def *d, const char *v, int continued)
{
	char *field = (char *)cfg + d->offset;
	uint64_t u;
	long long ll;
	int b;
	static char range[96];

	switch (d->kind) {
	case K_STRING:
		if (*v == '\0')
			return "an empty value";
		return set_string((char **)field, v) == IDEM_OK ? NULL :
		    "out of memory";
	case K_BOOL:
		if (idem_parse_bool(v, &b) != IDEM_OK)
			return "expected true or false";
		*(int *)field = b;
		return NULL;
	case K_UINT:
	case K_U64:
		if (idem_parse_int(v, (long long)d->min, (long long)d->max, &ll)
		    != IDEM_OK) {
			snprintf(range, sizeof(range),
			    "expected a whole number from %llu to %llu",
			    (unsigned long long)d->min,
			    (unsigned long long)d->max);
			return range;
		}
		if (d->kind == K_UINT)
			*(unsigned *)field = (unsigned)ll;
		else
			*(uint64_t *)field = (uint64_t)ll;
		return NULL;
	case K_SIZE:
		if (idem_parse_size(v, &u) != IDEM_OK)
			return "expected a size such as 512, 64k or 1m";
		if (u < d->min || u > d->max) {
			snprintf(range, sizeof(range),
			    "must be from %llu to %llu bytes",
			    (unsigned long long)d->min,
			    (unsigned long long)d->max);
			return range;
		}
		*(uint64_t *)field = u;
		return NULL;
	case K_DURATION:
		if (idem_parse_duration(v, &u) != IDEM_OK)
			return "expected a duration such as 500ms, 30s, 5m, 24h "
			    "or PT30M";
		if (u < d->min || u > d->max) {
			snprintf(range, sizeof(range),
			    "must be from %llums to %llums",
			    (unsigned long long)d->min,
			    (unsigned long long)d->max);
			return range;
		}
		*(uint64_t *)field = u;
		return NULL;
	case K_SPECIAL:
		return special(cfg, d, v, continued);
	}
	return "unknown key kind";
}

/* --------------------------------------------------------- INI parsing */

typedef struct parse_state {
	idem_config *cfg;
	const char *text;      /* string input, or NULL */
	FILE *fp;              /* file input, or NULL */
	unsigned line;         /* the line the reader returned last */
	unsigned seen[NKEYS];  /* line where each core key was set */
	char last_section[64];
	char last_key[64];
} parse_state;

/* inih's line reader: counts lines and refuses lines that do not fit. */
static char *
reader(char *str, int num, void *stream)
{
	parse_state *st = stream;
	size_t len;

	if (st->fp != NULL) {
		if (fgets(str, num, st->fp) == NULL)
			return NULL;
	} else {
		const char *nl;
		if (*st->text == '\0')
			return NULL;
		nl = strchr(st->text, '\n');
		len = nl != NULL ? (size_t)(nl - st->text) + 1 : strlen(st->text);
		if (len > (size_t)num - 1)
			len = (size_t)num - 1;
		memcpy(str, st->text, len);
		str[len] = '\0';
		st->text += len;
	}
	st->line++;
	len = strlen(str);
	if (len == (size_t)num - 1 && str[len - 1] != '\n') {
		int c;
		/* skip the rest of the line and report it */
		if (st->fp != NULL) {
			while ((c = fgetc(st->fp)) != EOF && c != '\n')
				;
		} else {
			while (*st->text != '\0' && *st->text++ != '\n')
				;
		}
		idem_config_error(st->cfg, st->line, NULL, NULL,
		    "line longer than %d characters (continue a list on an "
		    "indented next line)", num - 2);
		str[0] = '\0';
	}
	return str;
}

/* Cuts an inline "# comment" (inih cuts only ';') and trailing blanks. */
static void
strip_comment(char *v)
{
	char *p;
	size_t len;

	for (p = v; *p != '\0'; p++)
		if (*p == '#' && (p == v || p[-1] == ' ' || p[-1] == '\t')) {
			*p = '\0';
			break;
		}
	len = strlen(v);
	while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		v[--len] = '\0';
}

/* Appends a plugin-section entry. */
static idem_err
add_entry(idem_config *cfg, const char *section, const char *key,
    const char *value, unsigned line)
{
	idem_config_entry *e;

	if (cfg->nentries == cfg->capentries) {
		size_t cap = cfg->capentries ? cfg->capentries * 2 : 8;
		e = realloc(cfg->entries, cap * sizeof(*e));
		if (e == NULL)
			return IDEM_ERR_NOMEM;
		cfg->entries = e;
		cfg->capentries = cap;
	}
	e = &cfg->entries[cfg->nentries];
	e->section = strdup(section);
	e->key = strdup(key);
	e->value = strdup(value);
	e->line = line;
	e->used = 0;
	if (e->section == NULL || e->key == NULL || e->value == NULL) {
		free(e->section);
		free(e->key);
		free(e->value);
		return IDEM_ERR_NOMEM;
	}
	cfg->nentries++;
	return IDEM_OK;
}

/* inih's handler: one key = value (or a continuation line of it). */
static int
handler(void *user, const char *section, const char *name, const char *value)
{
	parse_state *st = user;
	idem_config *cfg = st->cfg;
	char v[512];
	int continued;
	size_t i;

	if (strlen(value) >= sizeof(v)) {
		idem_config_error(cfg, st->line, section, name,
		    "value too long");
		return 1;
	}
	strcpy(v, value);
	strip_comment(v);
	continued = strcmp(st->last_section, section) == 0 &&
	    strcmp(st->last_key, name) == 0;
	snprintf(st->last_section, sizeof(st->last_section), "%s", section);
	snprintf(st->last_key, sizeof(st->last_key), "%s", name);

	if (*section == '\0') {
		idem_config_error(cfg, st->line, NULL, name,
		    "key outside a section (put it under [server], "
		    "[idempotency], [metrics], [mysql] or a plugin's section)");
		return 1;
	}
	if (!is_core_section(section)) {
		for (i = 0; i < cfg->nentries; i++)
			if (strcmp(cfg->entries[i].section, section) == 0 &&
			    strcmp(cfg->entries[i].key, name) == 0) {
				idem_config_error(cfg, st->line, section, name,
				    "given twice (first on line %u)",
				    cfg->entries[i].line);
				return 1;
			}
		if (add_entry(cfg, section, name, v, st->line) != IDEM_OK)
			return 0;
		return 1;
	}
	for (i = 0; i < NKEYS; i++) {
		const char *why;

		if (strcmp(keys[i].section, section) != 0 ||
		    strcmp(keys[i].key, name) != 0)
			continue;
		if (st->seen[i] != 0 && !(continued &&
		    (strcmp(name, "plugins") == 0 ||
		    strcmp(name, "allow") == 0 ||
		    strcmp(name, "replay-omit-headers") == 0))) {
			idem_config_error(cfg, st->line, section, name,
			    "given twice (first on line %u)", st->seen[i]);
			return 1;
		}
		if (st->seen[i] == 0)
			st->seen[i] = st->line;
		if ((why = set_core(cfg, &keys[i], v, continued)) != NULL)
			idem_config_error(cfg, st->line, section, name,
			    "bad value \"%s\": %s", v, why);
		return 1;
	}
	idem_config_error(cfg, st->line, section, name, "unknown key");
	return 1;
}

/* The line where a core key was set, 0 when it was not. */
static unsigned
seen_line(const parse_state *st, const char *section, const char *key)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].section, section) == 0 &&
		    strcmp(keys[i].key, key) == 0)
			return st->seen[i];
	return 0;
}

/* Checks combinations of keys once the whole file is read. */
static void
check_whole(parse_state *st)
{
	idem_config *cfg = st->cfg;

	if (cfg->workers > 1 && cfg->idem_enabled &&
	    cfg->store == IDEM_STORE_MEMORY)
		idem_config_error(cfg, seen_line(st, "server", "workers"),
		    "server", "workers", "workers > 1 needs store = mysql: a "
		    "memory store is per process, and a retry that reaches "
		    "another worker would run again");
	if (cfg->metrics_enabled && cfg->policy_path != NULL &&
	    strcmp(cfg->metrics_path, cfg->policy_path) == 0)
		idem_config_error(cfg, seen_line(st, "metrics", "path"),
		    "metrics", "path", "the same path as [server] policy-path");
	if (cfg->store == IDEM_STORE_MYSQL && cfg->idem_enabled) {
		unsigned line = seen_line(st, "idempotency", "store");
		if (cfg->mysql_user == NULL)
			idem_config_error(cfg, line, "mysql", "user",
			    "store = mysql needs a user");
		if (cfg->mysql_database == NULL)
			idem_config_error(cfg, line, "mysql", "database",
			    "store = mysql needs a database");
	}
}

idem_err
idem_config_defaults(idem_config **out)
{
	idem_config *cfg = calloc(1, sizeof(*cfg));

	if (cfg == NULL)
		return IDEM_ERR_NOMEM;
	cfg->socket_mode = 0660;
	cfg->workers = 1;
	cfg->threads = 8;
	cfg->max_body = 1024 * 1024;
	cfg->max_headers = 100;
	cfg->max_header_size = 8192;
	cfg->max_params_size = 65536;
	cfg->shutdown_grace = 30000;
	cfg->log_level = IDEM_LOG_INFO;
	cfg->idem_enabled = 1;
	cfg->store = IDEM_STORE_MEMORY;
	cfg->key_format = IDEM_KEY_OPAQUE;
	cfg->required = 1;
	cfg->lifetime = DAY_MS;
	cfg->inflight_ttl = 30000;
	cfg->inflight_wait = 0;
	parse_statuses("2xx 400 404 409 422", cfg->commit_status);
	cfg->conflict_status = 409;
	cfg->scope = IDEM_SCOPE_NONE;
	cfg->max_entries = 100000;
	cfg->max_response = 1024 * 1024;
	cfg->cleanup_interval = 300000;
	cfg->mysql_port = 3306;
	cfg->mysql_pool_size = 8;
	cfg->mysql_connect_timeout = 2000;
	cfg->mysql_read_timeout = 5000;
	cfg->mysql_write_timeout = 5000;
	if ((cfg->path = strdup("(defaults)")) == NULL ||
	    (cfg->policy_path = strdup("/idempotency")) == NULL ||
	    (cfg->metrics_path = strdup("/metrics")) == NULL ||
	    parse_allow(cfg, "127.0.0.1 ::1", 0) != NULL ||
	    (cfg->mount = strdup("")) == NULL ||
	    (cfg->mysql_host = strdup("127.0.0.1")) == NULL) {
		idem_config_free(cfg);
		return IDEM_ERR_NOMEM;
	}
	*out = cfg;
	return IDEM_OK;
}

/* Shared body of the two loaders. */
static idem_err
load(parse_state *st, const char *name, idem_config **out)
{
	idem_config *cfg;
	idem_err err;
	int rc;

	if ((err = idem_config_defaults(&cfg)) != IDEM_OK)
		return err;
	if (set_string(&cfg->path, name) != IDEM_OK) {
		idem_config_free(cfg);
		return IDEM_ERR_NOMEM;
	}
	st->cfg = cfg;
	rc = ini_parse_stream(reader, st, handler, st);
	if (rc == -2) {
		idem_config_free(cfg);
		return IDEM_ERR_NOMEM;
	}
	if (rc > 0 && (unsigned)rc <= st->line)
		idem_config_error(cfg, (unsigned)rc, NULL, NULL,
		    "syntax error (expected [section] or key = value)");
	check_whole(st);
	if (cfg->errors > 0) {
		idem_config_free(cfg);
		return IDEM_ERR_CONFIG;
	}
	*out = cfg;
	return IDEM_OK;
}

idem_err
idem_config_load(const char *path, idem_config **out)
{
	parse_state st;
	idem_err err;

	memset(&st, 0, sizeof(st));
	if ((st.fp = fopen(path, "r")) == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: cannot read: %s", path,
		    strerror(errno));
		return IDEM_ERR_IO;
	}
	err = load(&st, path, out);
	fclose(st.fp);
	return err;
}

idem_err
idem_config_load_string(const char *text, const char *name,
    idem_config **out)
{
	parse_state st;

	memset(&st, 0, sizeof(st));
	st.text = text;
	return load(&st, name, out);
}

idem_config_entry *
idem_config_find(idem_config *cfg, const char *section, const char *key)
{
	size_t i;

	for (i = 0; i < cfg->nentries; i++)
		if (strcmp(cfg->entries[i].section, section) == 0 &&
		    strcmp(cfg->entries[i].key, key) == 0) {
			cfg->entries[i].used = 1;
			return &cfg->entries[i];
		}
	return NULL;
}

idem_err
idem_config_check_unused(idem_config *cfg, const char *const *plugin_names)
{
	unsigned before = cfg->errors;
	size_t i, j;

	for (i = 0; i < cfg->nentries; i++) {
		const idem_config_entry *e = &cfg->entries[i];
		int owned = 0, first = 1;

		for (j = 0; plugin_names != NULL && plugin_names[j] != NULL; j++)
			if (strcmp(plugin_names[j], e->section) == 0)
				owned = 1;
		for (j = 0; j < i; j++)
			if (strcmp(cfg->entries[j].section, e->section) == 0)
				first = 0;
		if (!owned && first)
			idem_config_error(cfg, e->line, e->section, NULL,
			    "unknown section (no loaded plugin is named \"%s\")",
			    e->section);
		else if (owned && !e->used)
			idem_config_error(cfg, e->line, e->section, e->key,
			    "unknown key");
	}
	return cfg->errors > before ? IDEM_ERR_CONFIG : IDEM_OK;
}

void
idem_config_free(idem_config *cfg)
{
	size_t i;

	if (cfg == NULL)
		return;
	free(cfg->path);
	free(cfg->listen);
	free(cfg->mount);
	free_words(&cfg->plugins, &cfg->nplugins);
	free_words(&cfg->replay_omit, &cfg->nreplay_omit);
	free(cfg->scope_header);
	free(cfg->policy_path);
	free(cfg->metrics_path);
	free(cfg->metrics_allow);
	free(cfg->mysql_host);
	free(cfg->mysql_socket);
	free(cfg->mysql_user);
	free(cfg->mysql_password_file);
	free(cfg->mysql_database);
	for (i = 0; i < cfg->nentries; i++) {
		free(cfg->entries[i].section);
		free(cfg->entries[i].key);
		free(cfg->entries[i].value);
	}
	free(cfg->entries);
	free(cfg);
}
