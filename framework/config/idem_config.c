/*
 * idem_config.c - the INI driver: reads the file with inih, counts its
 * lines, hands each key of a core section to the key table
 * (idem_config_keys.c) and keeps the keys of every other section for the
 * plugin of that name; reports every problem with file, line and key.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "idem_config.h"
#include "idem_config_keys.h"
#include "idem_log.h"

/* ------------------------------------------------------- error reports */

/* Writes the stores with a database of this build into db_stores. */
static char db_stores[96];
static void
db_stores_make(void)
{
	static const char *const built[] = {
#ifdef HAVE_MYSQL
		"mysql",
#endif
#ifdef HAVE_POSTGRES
		"postgres",
#endif
#ifdef HAVE_REDIS
		"redis",
#endif
		NULL
	};
	size_t i, n = sizeof(built) / sizeof(built[0]) - 1, len = 0;

	if (n == 0) {
		snprintf(db_stores, sizeof(db_stores), "none in this build, "
		    "made ./configure --without-mysql --without-postgres "
		    "--without-redis");
		return;
	}
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(db_stores + len, sizeof(db_stores) - len,
		    "%sstore = %s", i == 0 ? "" : i + 1 == n ? " or " : ", ",
		    built[i]);
}

const char *
idem_config_db_stores(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, db_stores_make);
	return db_stores;
}

/* Logs one problem of cfg's file and counts it. */
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
	if (section != NULL && (strcmp(section, "idempotency") == 0 ||
	    strcmp(section, "mysql") == 0 || strcmp(section, "postgres") == 0 ||
	    strcmp(section, "redis") == 0))
		cfg->store_errors++;
	if (key != NULL && section != NULL)
		idem_log(NULL, IDEM_LOG_ERROR, "%s:%u: [%s] %s: %s", cfg->path,
		    line, section, key, msg);
	else if (key != NULL)   /* a key outside any section */
		idem_log(NULL, IDEM_LOG_ERROR, "%s:%u: %s: %s", cfg->path,
		    line, key, msg);
	else if (section != NULL)
		idem_log(NULL, IDEM_LOG_ERROR, "%s:%u: [%s]: %s", cfg->path,
		    line, section, msg);
	else
		idem_log(NULL, IDEM_LOG_ERROR, "%s:%u: %s", cfg->path, line,
		    msg);
}

/* ---------------------------------------------------------- suggestions */

/* Edit distance of a and b with swaps of neighbours (optimal string
 * alignment), for words of at most 63 characters; longer ones are
 * IDEM_MAX_WORD apart from everything.  Returns it. */
#define IDEM_MAX_WORD 64
static size_t
distance(const char *a, const char *b)
{
	size_t d[IDEM_MAX_WORD][IDEM_MAX_WORD], la = strlen(a), lb = strlen(b);
	size_t i, j;

	if (la >= IDEM_MAX_WORD || lb >= IDEM_MAX_WORD)
		return IDEM_MAX_WORD;
	for (i = 0; i <= la; i++)
		d[i][0] = i;
	for (j = 0; j <= lb; j++)
		d[0][j] = j;
	for (i = 1; i <= la; i++)
		for (j = 1; j <= lb; j++) {
			size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[la][lb];
}

/* The closest candidate within a third of word.  Returns it or NULL. */
const char *
idem_config_closest(const char *word, const char *const *candidates,
    size_t n)
{
	size_t i, most = strlen(word) / 3, best = IDEM_MAX_WORD;
	const char *found = NULL;

	if (most == 0)
		most = 1;
	for (i = 0; i < n; i++) {
		size_t d;
		if (candidates[i] == NULL || strcmp(candidates[i], word) == 0)
			continue;
		if ((d = distance(word, candidates[i])) <= most && d < best) {
			best = d;
			found = candidates[i];
		}
	}
	return found;
}

/* Logs an unknown key, with the closest of the n candidates. */
static void
unknown_key(idem_config *cfg, unsigned line, const char *section,
    const char *key, const char *const *candidates, size_t n)
{
	const char *near = idem_config_closest(key, candidates, n);

	if (near != NULL)
		idem_config_error(cfg, line, section, key, "unknown key; did "
		    "you mean %s?", near);
	else
		idem_config_error(cfg, line, section, key, "unknown key");
}

/* Logs an unknown key of a core section, with the closest key of that
 * section. */
static void
unknown_core_key(idem_config *cfg, unsigned line, const char *section,
    const char *key)
{
	const char *names[IDEM_CONFIG_MAX_KEYS], *sec, *k;
	size_t i, n = 0;

	for (i = 0; (k = idem_config_key_at(i, &sec)) != NULL; i++)
		if (strcmp(sec, section) == 0 && n < IDEM_CONFIG_MAX_KEYS)
			names[n++] = k;
	unknown_key(cfg, line, section, key, names, n);
}

/* --------------------------------------------------------- INI parsing */

typedef struct parse_state {
	idem_config *cfg;
	const char *text;      /* string input, or NULL */
	FILE *fp;              /* file input, or NULL */
	unsigned line;         /* the line the reader returned last */
	unsigned seen[IDEM_CONFIG_MAX_KEYS]; /* line where each core key
	                       * was set */
	char last_section[64];
	char last_key[64];
	int keep;              /* a config with problems is still returned */
	int in_route;          /* the last section header was [route ...] */
	long route;            /* its index in cfg->routes; -1: malformed */
} parse_state;

static void section_header(parse_state *st, const char *line);

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
	section_header(st, str);
	return str;
}

/* ------------------------------------------------------- route sections */

/* Whether method is 1 to 32 upper-case letters, as a route's. */
static int
method_ok(const char *m, size_t len)
{
	size_t i;

	if (len == 0 || len > 32)
		return 0;
	for (i = 0; i < len; i++)
		if (m[i] < 'A' || m[i] > 'Z')
			return 0;
	return 1;
}

/* Adds the route section name (METHOD PATH after "route") of line st->line
 * to cfg, refusing a malformed one or one given twice.  Returns its index,
 * or -1. */
static long
route_section(parse_state *st, const char *name, size_t len)
{
	idem_config *cfg = st->cfg;
	const char *m, *path;
	idem_route_section *rs;
	size_t mlen, plen, i;
	char shown[300];

	/* the header's name alone, NUL-terminated (a line is shorter) */
	snprintf(shown, sizeof(shown), "%.*s", (int)(len < 290 ? len : 290),
	    name);
	m = shown + 5;
	while (*m == ' ' || *m == '\t')
		m++;
	mlen = strcspn(m, " \t");
	path = m + mlen;
	while (*path == ' ' || *path == '\t')
		path++;
	plen = strlen(path);
	if (!method_ok(m, mlen) || plen == 0 || path[0] != '/' ||
	    strcspn(path, " \t") < plen) {
		idem_config_error(cfg, st->line, shown, NULL, "expected [route "
		    "METHOD PATH], such as [route POST /orders/{id}/cancel]: "
		    "METHOD in capitals, PATH a route template under mount");
		return -1;
	}
	for (i = 0; i < cfg->nroutes; i++)
		if (strlen(cfg->routes[i].method) == mlen &&
		    strncmp(cfg->routes[i].method, m, mlen) == 0 &&
		    strlen(cfg->routes[i].tmpl) == plen &&
		    strncmp(cfg->routes[i].tmpl, path, plen) == 0) {
			idem_config_error(cfg, st->line, shown, NULL, "given twice "
			    "(first on line %u)", cfg->routes[i].line);
			return -1;
		}
	rs = realloc(cfg->routes, (cfg->nroutes + 1) * sizeof(*rs));
	if (rs == NULL) {
		idem_config_error(cfg, st->line, shown, NULL, "out of memory");
		return -1;
	}
	cfg->routes = rs;
	rs = &cfg->routes[cfg->nroutes];
	memset(rs, 0, sizeof(*rs));
	rs->line = st->line;
	rs->method = strndup(m, mlen);
	rs->tmpl = strndup(path, plen);
	rs->name = malloc(mlen + plen + 8);
	if (rs->method == NULL || rs->tmpl == NULL || rs->name == NULL) {
		free(rs->method);
		free(rs->tmpl);
		free(rs->name);
		idem_config_error(cfg, st->line, shown, NULL, "out of memory");
		return -1;
	}
	snprintf(rs->name, mlen + plen + 8, "route %.*s %.*s", (int)mlen, m,
	    (int)plen, path);
	return (long)cfg->nroutes++;
}

/*
 * Looks at each line the reader returns before inih does: a section header
 * [route METHOD PATH] is taken here, whole (inih keeps only 50 bytes of a
 * section's name), and the keys up to the next header are its.  Only a
 * header at the start of its line: inih takes an indented one after a key
 * as a continuation of that key's value.
 */
static void
section_header(parse_state *st, const char *line)
{
	const char *p = line, *end;
	size_t len;

	if (st->line == 1 && strncmp(p, "\xEF\xBB\xBF", 3) == 0)
		p += 3; /* a UTF-8 BOM, which inih skips too */
	if (*p != '[' || (end = strchr(p, ']')) == NULL)
		return;
	st->last_key[0] = '\0';
	p++;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	len = (size_t)(end - p);
	while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	st->in_route = len > 5 && strncmp(p, "route", 5) == 0 &&
	    (p[5] == ' ' || p[5] == '\t');
	if (st->in_route)
		st->route = route_section(st, p, len);
}

/* A key of a [route METHOD PATH] section.  Returns 1. */
static int
route_key(parse_state *st, const char *name, const char *v, int continued)
{
	idem_config *cfg = st->cfg;
	idem_route_section *rs;
	const char *names[IDEM_RK__MAX], *bad;
	char why[256];
	int k;

	if (st->route < 0)
		return 1; /* its header was refused */
	rs = &cfg->routes[st->route];
	if ((k = idem_route_key_index(name)) < 0) {
		for (k = 0; k < IDEM_RK__MAX; k++)
			names[k] = idem_route_key_name(k);
		unknown_key(cfg, st->line, rs->name, name, names, IDEM_RK__MAX);
		return 1;
	}
	if (rs->lines[k] != 0 && !(continued && idem_route_key_is_list(k))) {
		idem_config_error(cfg, st->line, rs->name, name,
		    "given twice (first on line %u)", rs->lines[k]);
		return 1;
	}
	if (rs->lines[k] == 0)
		rs->lines[k] = st->line;
	bad = idem_route_key_set(&rs->conf, k, v, continued, why, sizeof(why));
	if (bad != NULL)
		idem_config_error(cfg, st->line, rs->name, name,
		    "bad value \"%s\": %s", v, bad);
	return 1;
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

/* Logs a key outside any section, naming the core sections. */
static void
outside_section(parse_state *st, const char *name)
{
	char list[256];
	const char *sec;
	size_t i, len = 0;

	list[0] = '\0';
	for (i = 0; (sec = idem_config_core_section(i)) != NULL &&
	    len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s[%s]",
		    i > 0 ? ", " : "", sec);
	idem_config_error(st->cfg, st->line, NULL, name, "key outside a "
	    "section (put it under %s or a plugin's section)", list);
}

/* Keeps a key of a plugin's section.  Returns 1, or 0 when out of
 * memory (inih then stops). */
static int
plugin_key(parse_state *st, const char *section, const char *name,
    const char *v)
{
	idem_config *cfg = st->cfg;
	size_t i;

	for (i = 0; i < cfg->nentries; i++)
		if (strcmp(cfg->entries[i].section, section) == 0 &&
		    strcmp(cfg->entries[i].key, name) == 0) {
			idem_config_error(cfg, st->line, section, name,
			    "given twice (first on line %u)",
			    cfg->entries[i].line);
			return 1;
		}
	return add_entry(cfg, section, name, v, st->line) == IDEM_OK;
}

/* inih's handler: one key = value (or a continuation line of it).
 * Returns 1, or 0 when out of memory. */
static int
handler(void *user, const char *section, const char *name, const char *value)
{
	parse_state *st = user;
	idem_config *cfg = st->cfg;
	char v[512], why[256];
	const char *bad;
	int continued, i;

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
		outside_section(st, name);
		return 1;
	}
	if (st->in_route)
		return route_key(st, name, v, continued);
	if (!idem_config_is_core_section(section))
		return plugin_key(st, section, name, v);
	if ((i = idem_config_key_index(section, name)) < 0) {
		unknown_core_key(cfg, st->line, section, name);
		return 1;
	}
	if (st->seen[i] != 0 && !(continued && idem_config_key_is_list(i))) {
		idem_config_error(cfg, st->line, section, name,
		    "given twice (first on line %u)", st->seen[i]);
		return 1;
	}
	if (st->seen[i] == 0)
		st->seen[i] = st->line;
	bad = idem_config_key_set(cfg, i, v, continued, why, sizeof(why));
	if (bad != NULL)
		idem_config_error(cfg, st->line, section, name,
		    "bad value \"%s\": %s", v, bad);
	return 1;
}

/* Allocates a configuration with every default.  Returns IDEM_OK with
 * *out, IDEM_ERR_NOMEM, or IDEM_ERR_CONFIG for a bad default (a bug). */
idem_err
idem_config_defaults(idem_config **out)
{
	idem_config *cfg = calloc(1, sizeof(*cfg));
	idem_err err;

	if (cfg == NULL)
		return IDEM_ERR_NOMEM;
	if ((cfg->path = strdup("(defaults)")) == NULL) {
		free(cfg);
		return IDEM_ERR_NOMEM;
	}
	if ((err = idem_config_keys_defaults(cfg)) != IDEM_OK) {
		idem_config_free(cfg);
		return err;
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
	free(cfg->path);
	if ((cfg->path = strdup(name)) == NULL) {
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
	idem_config_keys_check(cfg, st->seen);
	if (cfg->errors > 0 && st->keep) {
		*out = cfg;
		return IDEM_ERR_CONFIG;
	}
	if (cfg->errors > 0) {
		idem_config_free(cfg);
		return IDEM_ERR_CONFIG;
	}
	*out = cfg;
	return IDEM_OK;
}

/* Reads and checks the file at path; keep: *out also on IDEM_ERR_CONFIG.
 * Returns IDEM_OK with *out, IDEM_ERR_IO, IDEM_ERR_CONFIG or
 * IDEM_ERR_NOMEM. */
static idem_err
load_file(const char *path, int keep, idem_config **out)
{
	parse_state st;
	idem_err err;

	memset(&st, 0, sizeof(st));
	st.keep = keep;
	if ((st.fp = fopen(path, "r")) == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: cannot read: %s", path,
		    strerror(errno));
		return IDEM_ERR_IO;
	}
	err = load(&st, path, out);
	fclose(st.fp);
	return err;
}

/* Reads and checks the file at path.  Returns as load_file. */
idem_err
idem_config_load(const char *path, idem_config **out)
{
	return load_file(path, 0, out);
}

/* Reads and checks the file at path, keeping it even with problems.
 * Returns as idem_config_load, with *out also on IDEM_ERR_CONFIG. */
idem_err
idem_config_load_all(const char *path, idem_config **out)
{
	return load_file(path, 1, out);
}

/* Reads and checks text, named name in messages.  Returns as
 * idem_config_load. */
idem_err
idem_config_load_string(const char *text, const char *name,
    idem_config **out)
{
	parse_state st;

	memset(&st, 0, sizeof(st));
	st.text = text;
	return load(&st, name, out);
}

/* Remembers that a plugin looked for key of section, found or not (a
 * best effort: out of memory, it is not suggested). */
static void
remember_asked(idem_config *cfg, const char *section, const char *key)
{
	idem_config_entry *a;
	size_t i;

	for (i = 0; i < cfg->nasked; i++)
		if (strcmp(cfg->asked[i].section, section) == 0 &&
		    strcmp(cfg->asked[i].key, key) == 0)
			return;
	if ((a = realloc(cfg->asked, (cfg->nasked + 1) * sizeof(*a))) == NULL)
		return;
	cfg->asked = a;
	a = &cfg->asked[cfg->nasked];
	memset(a, 0, sizeof(*a));
	a->section = strdup(section);
	a->key = strdup(key);
	if (a->section == NULL || a->key == NULL) {
		free(a->section);
		free(a->key);
		return;
	}
	cfg->nasked++;
}

/* The entry of a plugin key, marked used.  Returns it or NULL. */
idem_config_entry *
idem_config_find(idem_config *cfg, const char *section, const char *key)
{
	size_t i;

	remember_asked(cfg, section, key);
	for (i = 0; i < cfg->nentries; i++)
		if (strcmp(cfg->entries[i].section, section) == 0 &&
		    strcmp(cfg->entries[i].key, key) == 0) {
			cfg->entries[i].used = 1;
			return &cfg->entries[i];
		}
	return NULL;
}

/* Logs an unread key of a plugin's section, with the closest key the
 * plugin looked for there. */
static void
unknown_plugin_key(idem_config *cfg, const idem_config_entry *e)
{
	const char **names = calloc(cfg->nasked + 1, sizeof(*names));
	size_t i, n = 0;

	for (i = 0; names != NULL && i < cfg->nasked; i++)
		if (strcmp(cfg->asked[i].section, e->section) == 0)
			names[n++] = cfg->asked[i].key;
	unknown_key(cfg, e->line, e->section, e->key, names, n);
	free(names);
}

/* Logs a section no plugin owns, with the closest plugin or core
 * section name. */
static void
unknown_section(idem_config *cfg, const idem_config_entry *e,
    const char *const *plugin_names)
{
	const char *names[IDEM_CONFIG_MAX_KEYS], *near, *sec;
	size_t i, n = 0;

	for (i = 0; plugin_names != NULL && plugin_names[i] != NULL &&
	    n < IDEM_CONFIG_MAX_KEYS; i++)
		names[n++] = plugin_names[i];
	for (i = 0; (sec = idem_config_core_section(i)) != NULL &&
	    n < IDEM_CONFIG_MAX_KEYS; i++)
		names[n++] = sec;
	if ((near = idem_config_closest(e->section, names, n)) != NULL)
		idem_config_error(cfg, e->line, e->section, NULL, "unknown "
		    "section (no loaded plugin is named \"%s\"); did you mean "
		    "[%s]?", e->section, near);
	else
		idem_config_error(cfg, e->line, e->section, NULL, "unknown "
		    "section (no loaded plugin is named \"%s\")", e->section);
}

/* Logs unread plugin keys and sections of no plugin.  Returns IDEM_OK or
 * IDEM_ERR_CONFIG. */
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
			unknown_section(cfg, e, plugin_names);
		else if (owned && !e->used)
			unknown_plugin_key(cfg, e);
	}
	return cfg->errors > before ? IDEM_ERR_CONFIG : IDEM_OK;
}

/* Frees cfg and all it owns; NULL is fine. */
void
idem_config_free(idem_config *cfg)
{
	size_t i;

	if (cfg == NULL)
		return;
	idem_config_keys_free(cfg);
	free(cfg->path);
	for (i = 0; i < cfg->nentries; i++) {
		free(cfg->entries[i].section);
		free(cfg->entries[i].key);
		free(cfg->entries[i].value);
	}
	free(cfg->entries);
	for (i = 0; i < cfg->nasked; i++) {
		free(cfg->asked[i].section);
		free(cfg->asked[i].key);
	}
	free(cfg->asked);
	free(cfg);
}
