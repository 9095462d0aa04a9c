/*
 * test_monitoring.c - what the operators' tools see.  promtool (Debian
 * package prometheus, installed by scripts/deps; missing, the tests fail)
 * checks the /metrics text of instances that served every kind of request,
 * on the memory store and on the MySQL store; the Grafana dashboard
 * (conf/grafana/idemfcgi.json) and the alerting rules
 * (conf/prometheus/idemfcgi-rules.yml) name only metrics such an instance
 * exports, and docs/operations.md describes every panel.  promtool's own
 * checks of the rules (check rules, test rules) are
 * tests/prometheus/check-rules.sh.  A private MariaDB for the MySQL store.
 */
#include <ctype.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "calls.h"
#include "fcgi_client.h"
#include "harness.h"

/* ------------------------------------------------------- name lists */

/* A list of strings (each owned). */
typedef struct list {
	char **v;
	size_t n, cap;
} list;

static void
list_add(list *l, const char *s, size_t len)
{
	if (l->n == l->cap) {
		l->cap = l->cap != 0 ? l->cap * 2 : 16;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		cr_assert_not_null(l->v);
	}
	l->v[l->n] = strndup(s, len);
	cr_assert_not_null(l->v[l->n]);
	l->n++;
}

static int
list_has(const list *l, const char *s)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return 1;
	return 0;
}

static void
list_free(list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Adds a formatted message to problems. */
static void __attribute__((format(printf, 2, 3)))
problem(list *problems, const char *fmt, ...)
{
	char *msg;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	cr_assert_geq(n, 0);
	list_add(problems, msg, (size_t)n);
	free(msg);
}

/* Expects problems to be empty, listing them. */
static void
expect_none(const list *problems)
{
	size_t i;

	for (i = 0; i < problems->n; i++)
		cr_expect_fail("%s", problems->v[i]);
}

/* Whether some problem contains both a and b. */
static int
reported(const list *problems, const char *a, const char *b)
{
	size_t i;

	for (i = 0; i < problems->n; i++)
		if (strstr(problems->v[i], a) != NULL &&
		    strstr(problems->v[i], b) != NULL)
			return 1;
	return 0;
}

/* What a scrape exports: the names of its samples, and of its families
 * with their types.  A histogram's samples are NAME_bucket, NAME_sum and
 * NAME_count, whether or not it has any yet. */
typedef struct exported {
	list names, families, types;
} exported;

static void
exported_read(exported *x, const char *text)
{
	const char *line, *eol, *p;
	char suffixed[200];

	memset(x, 0, sizeof(*x));
	for (line = text; *line != '\0'; line = *eol != '\0' ? eol + 1 : eol) {
		eol = strchrnul(line, '\n');
		if (strncmp(line, "# TYPE ", 7) == 0) {
			const char *name = line + 7, *sp = memchr(name, ' ',
			    (size_t)(eol - name));
			cr_assert_not_null(sp, "%.*s", (int)(eol - line), line);
			list_add(&x->families, name, (size_t)(sp - name));
			list_add(&x->types, sp + 1, (size_t)(eol - sp - 1));
			if ((size_t)(eol - sp - 1) == 9 &&
			    strncmp(sp + 1, "histogram", 9) == 0) {
				static const char *const sfx[] = { "_bucket",
				    "_sum", "_count" };
				size_t i;
				for (i = 0; i < 3; i++) {
					snprintf(suffixed, sizeof(suffixed),
					    "%.*s%s", (int)(sp - name), name,
					    sfx[i]);
					if (!list_has(&x->names, suffixed))
						list_add(&x->names, suffixed,
						    strlen(suffixed));
				}
			}
			continue;
		}
		if (*line == '#' || line == eol)
			continue;
		for (p = line; p < eol && *p != '{' && *p != ' '; p++)
			;
		snprintf(suffixed, sizeof(suffixed), "%.*s", (int)(p - line),
		    line);
		if (!list_has(&x->names, suffixed))
			list_add(&x->names, suffixed, strlen(suffixed));
	}
}

static void
exported_free(exported *x)
{
	list_free(&x->names);
	list_free(&x->families);
	list_free(&x->types);
}

/* --------------------------------------------- metric names in PromQL */

static int
ident_start(int c)
{
	return isalpha(c) || c == '_' || c == ':';
}

static int
ident_char(int c)
{
	return isalnum(c) || c == '_' || c == ':';
}

/* Whether s (len bytes) is one of words. */
static int
one_of(const char *const *words, const char *s, size_t len)
{
	for (; *words != NULL; words++)
		if (strlen(*words) == len && strncmp(*words, s, len) == 0)
			return 1;
	return 0;
}

/* Past the string literal at p (", ' or `), or NULL when unterminated. */
static const char *
skip_string(const char *p)
{
	char q = *p++;

	for (; *p != '\0' && *p != q; p++)
		if (*p == '\\' && q != '`' && p[1] != '\0')
			p++;
	return *p == q ? p + 1 : NULL;
}

/* Past the bracket that closes the one at p ({ or [), skipping strings;
 * NULL when there is none. */
static const char *
skip_closing(const char *p)
{
	char close = *p == '{' ? '}' : ']';

	for (p++; *p != '\0' && *p != close; )
		if (*p == '"' || *p == '\'' || *p == '`') {
			if ((p = skip_string(p)) == NULL)
				return NULL;
		} else
			p++;
	return *p == close ? p + 1 : NULL;
}

/*
 * The metric names of a PromQL expression into names, and the label
 * matchers written after each (without braces, "" when none) into the
 * same index of matchers.  Skips strings, ranges, Grafana's $variables,
 * numbers and durations, keywords and aggregations, function names (an
 * identifier before "("), and the label lists of by, without, on,
 * ignoring, group_left and group_right.  Returns NULL, or what is wrong.
 */
static const char *
promql_metrics(const char *e, list *names, list *matchers)
{
	static const char *const label_lists[] = { "by", "without", "on",
	    "ignoring", "group_left", "group_right", NULL };
	static const char *const keywords[] = { "bool", "and", "or",
	    "unless", "offset", "atan2", "sum", "min", "max", "avg", "group",
	    "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
	    "quantile", "inf", "nan", NULL };
	const char *p = e, *s, *q, *r;

	while (*p != '\0') {
		if (*p == '"' || *p == '\'' || *p == '`') {
			if ((p = skip_string(p)) == NULL)
				return "an unterminated string";
		} else if (*p == '[') {
			if ((p = skip_closing(p)) == NULL)
				return "an unterminated [";
		} else if (*p == '{') {
			return "a selector without a metric name";
		} else if (*p == '$') {
			p++;
			if (*p == '{') {
				if ((p = strchr(p, '}')) == NULL)
					return "an unterminated ${";
				p++;
			} else
				while (ident_char((unsigned char)*p))
					p++;
		} else if (isdigit((unsigned char)*p) || (*p == '.' &&
		    isdigit((unsigned char)p[1]))) {
			while (isalnum((unsigned char)*p) || *p == '.')
				p++;
		} else if (ident_start((unsigned char)*p)) {
			for (s = p; ident_char((unsigned char)*p); p++)
				;
			for (q = p; isspace((unsigned char)*q); q++)
				;
			if (one_of(label_lists, s, (size_t)(p - s))) {
				if (*q == '(') {
					if ((r = strchr(q, ')')) == NULL)
						return "an unterminated label list";
					p = r + 1;
				}
				continue;
			}
			if (one_of(keywords, s, (size_t)(p - s)) || *q == '(')
				continue;
			list_add(names, s, (size_t)(p - s));
			if (*q == '{') {
				if ((r = skip_closing(q)) == NULL)
					return "an unterminated {";
				list_add(matchers, q + 1, (size_t)(r - q - 2));
				p = r;
			} else
				list_add(matchers, "", 0);
		} else
			p++;
	}
	return NULL;
}

/* The expression of a Grafana "label_values(EXPR, LABEL)" query: EXPR
 * into buf; "" for "label_values(LABEL)"; q itself for any other query. */
static const char *
variable_expr(const char *q, char *buf, size_t size)
{
	const char *in, *end, *p, *comma = NULL;
	int depth = 0;

	if (strncmp(q, "label_values(", 13) != 0)
		return q;
	in = q + 13;
	end = strrchr(in, ')');
	cr_assert_not_null(end, "%s", q);
	for (p = in; p < end; p++) {
		if (*p == '"') {
			p = skip_string(p);
			cr_assert_not_null(p, "%s", q);
			p--;
		} else if (*p == '{' || *p == '(')
			depth++;
		else if (*p == '}' || *p == ')')
			depth--;
		else if (*p == ',' && depth == 0)
			comma = p;
	}
	snprintf(buf, size, "%.*s", comma != NULL ? (int)(comma - in) : 0, in);
	return buf;
}

/*
 * Checks that every metric expr names is exported (names starting with
 * absent_ok need not be: "" for none), that it names at least one, and,
 * with filtered, that each of its selectors filters by the dashboard's
 * job and instance variables; what is wrong goes to problems.  Adds the
 * names to used.  what says where expr is, for the messages.
 */
static void
check_expr(const char *what, const char *expr, const exported *x,
    const char *absent_ok, int filtered, list *used, list *problems)
{
	list names = { 0 }, matchers = { 0 };
	const char *err = promql_metrics(expr, &names, &matchers);
	size_t i;

	if (err != NULL)
		problem(problems, "%s: %s in %s", what, err, expr);
	if (names.n == 0)
		problem(problems, "%s: no metric in %s", what, expr);
	for (i = 0; i < names.n; i++) {
		const char *n = names.v[i];
		if (!list_has(used, n))
			list_add(used, n, strlen(n));
		if (!list_has(&x->names, n) && (*absent_ok == '\0' ||
		    strncmp(n, absent_ok, strlen(absent_ok)) != 0))
			problem(problems, "%s: %s is not a metric the instance "
			    "exports (%s)", what, n, expr);
		if (filtered && (strstr(matchers.v[i], "job=~\"$job\"") ==
		    NULL || strstr(matchers.v[i], "instance=~\"$instance\"") ==
		    NULL))
			problem(problems, "%s: %s{%s} is not filtered by $job "
			    "and $instance", what, n, matchers.v[i]);
	}
	list_free(&names);
	list_free(&matchers);
}

/* Checks that every family x exports is in used (a histogram: any of its
 * samples); what names the file that should have them. */
static void
check_coverage(const char *what, const exported *x, const list *used,
    list *problems)
{
	char name[200];
	size_t i;

	for (i = 0; i < x->families.n; i++) {
		const char *f = x->families.v[i];
		int found = list_has(used, f);
		if (strcmp(x->types.v[i], "histogram") == 0) {
			snprintf(name, sizeof(name), "%s_bucket", f);
			found = found || list_has(used, name);
			snprintf(name, sizeof(name), "%s_sum", f);
			found = found || list_has(used, name);
			snprintf(name, sizeof(name), "%s_count", f);
			found = found || list_has(used, name);
		}
		if (!found)
			problem(problems, "%s: nothing shows %s", what, f);
	}
}

/* ------------------------------------------------------- the files */

/* IDEM_SRCDIR/rel, read whole (caller frees). */
static char *
source_file(const char *rel)
{
	const char *src = getenv("IDEM_SRCDIR");
	char path[512];
	char *text;

	cr_assert_not_null(src, "IDEM_SRCDIR is not set");
	snprintf(path, sizeof(path), "%s/%s", src, rel);
	text = harness_slurp(path);
	cr_assert_not_null(text, "cannot read %s", path);
	return text;
}

#define DASHBOARD "conf/grafana/idemfcgi.json"
#define RULES "conf/prometheus/idemfcgi-rules.yml"

/* The panels of a dashboard's panel array, rows' own panels included,
 * into out (borrowed references). */
static void
panels_of(json_t *array, json_t *out)
{
	size_t i;
	json_t *p;

	json_array_foreach(array, i, p) {
		const char *type = json_string_value(json_object_get(p, "type"));
		if (type != NULL && strcmp(type, "row") == 0)
			panels_of(json_object_get(p, "panels"), out);
		else
			json_array_append(out, p);
	}
}

/* Whether doc's datasource is the DS_PROMETHEUS variable. */
static int
on_ds_variable(json_t *doc)
{
	const char *uid = json_string_value(json_object_get(json_object_get(doc,
	    "datasource"), "uid"));

	return uid != NULL && strcmp(uid, "${DS_PROMETHEUS}") == 0;
}

/*
 * The dashboard: a Grafana dashboard (schema 36 to 39) with a data source
 * variable and job, instance and route variables (route's All matching
 * the series without a route); each panel on that data
 * source, in its own cells of the grid, described in docs/operations.md,
 * with queries that name only metrics x exports (but those starting with
 * absent_ok), each filtered by job and instance; and every family of x
 * on some panel, unless absent_ok is given (another store's scrape).
 * What is wrong with the queries goes to problems; the rest is expected.
 */
static void
check_dashboard(const exported *x, const char *absent_ok, list *problems)
{
	char *text = source_file(DASHBOARD), *doc = source_file(
	    "docs/operations.md"), buf[512], what[300];
	json_error_t e;
	json_t *d = json_loads(text, 0, &e), *panels, *p, *v, *t;
	list used = { 0 }, ids = { 0 };
	unsigned char grid[24][200];
	const char *ds = NULL, *job = NULL, *instance = NULL, *route = NULL;
	size_t i, j, k;
	json_int_t schema;
	int overlaps;

	cr_assert_not_null(d, DASHBOARD ":%d: %s", e.line, e.text);
	schema = json_integer_value(json_object_get(d, "schemaVersion"));
	cr_expect(schema >= 36 && schema <= 39, "schemaVersion %lld",
	    (long long)schema);
	cr_expect(json_is_string(json_object_get(d, "uid")));
	cr_expect(json_is_string(json_object_get(d, "title")));
	json_array_foreach(json_object_get(json_object_get(d, "templating"),
	    "list"), i, v) {
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *type = json_string_value(json_object_get(v, "type"));
		json_t *q = json_object_get(v, "query");
		const char *query = json_is_object(q) ? json_string_value(
		    json_object_get(q, "query")) : json_string_value(q);
		cr_assert(name != NULL && type != NULL && query != NULL,
		    "variable %zu", i);
		if (strcmp(name, "DS_PROMETHEUS") == 0) {
			cr_expect_str_eq(type, "datasource");
			cr_expect_str_eq(query, "prometheus");
			ds = name;
			continue;
		}
		if (strcmp(name, "job") == 0)
			job = name;
		if (strcmp(name, "instance") == 0)
			instance = name;
		/* "All" must match the outcomes without a route too */
		if (strcmp(name, "route") == 0) {
			route = name;
			cr_expect(json_is_true(json_object_get(v, "includeAll")) &&
			    json_is_string(json_object_get(v, "allValue")) &&
			    strcmp(json_string_value(json_object_get(v,
			    "allValue")), ".*") == 0, "variable route: All is not "
			    "\".*\"");
		}
		cr_expect_str_eq(type, "query", "variable %s", name);
		cr_expect(on_ds_variable(v), "variable %s", name);
		cr_expect(!json_is_string(json_object_get(v, "definition")) ||
		    strcmp(json_string_value(json_object_get(v, "definition")),
		    query) == 0, "variable %s: its definition is not its "
		    "query", name);
		snprintf(what, sizeof(what), "variable %s", name);
		check_expr(what, variable_expr(query, buf, sizeof(buf)), x,
		    absent_ok, 0, &used, problems);
	}
	cr_expect_not_null(ds, "no DS_PROMETHEUS data source variable");
	cr_expect_not_null(job, "no job variable");
	cr_expect_not_null(instance, "no instance variable");
	cr_expect_not_null(route, "no route variable");

	panels = json_array();
	panels_of(json_object_get(d, "panels"), panels);
	cr_expect_geq(json_array_size(panels), 10);
	memset(grid, 0, sizeof(grid));
	json_array_foreach(panels, i, p) {
		const char *title = json_string_value(json_object_get(p, "title"));
		json_t *gp = json_object_get(p, "gridPos");
		json_int_t gx = json_integer_value(json_object_get(gp, "x")),
		    gy = json_integer_value(json_object_get(gp, "y")),
		    gw = json_integer_value(json_object_get(gp, "w")),
		    gh = json_integer_value(json_object_get(gp, "h"));
		list refs = { 0 };

		cr_assert_not_null(title, "panel %zu has no title", i);
		snprintf(buf, sizeof(buf), "%lld",
		    (long long)json_integer_value(json_object_get(p, "id")));
		cr_expect(json_is_integer(json_object_get(p, "id")) &&
		    !list_has(&ids, buf), "%s: no id, or another panel's", title);
		list_add(&ids, buf, strlen(buf));
		/* its own cells of the 24-column grid */
		cr_expect(gw > 0 && gh > 0 && gx >= 0 && gx + gw <= 24 &&
		    gy >= 0 && gy + gh <= 200, "%s: gridPos", title);
		overlaps = 0;
		for (j = (size_t)gx; gw > 0 && j < (size_t)(gx + gw) &&
		    j < 24; j++)
			for (k = (size_t)gy; gh > 0 && k < (size_t)(gy + gh) &&
			    k < 200; k++) {
				overlaps |= grid[j][k];
				grid[j][k] = 1;
			}
		cr_expect(!overlaps, "%s overlaps another panel", title);
		cr_expect(on_ds_variable(p), "%s: datasource", title);
		snprintf(buf, sizeof(buf), "**%s**", title);
		cr_expect(strstr(doc, buf) != NULL, "docs/operations.md does "
		    "not describe the panel %s", buf);
		cr_expect_gt(json_array_size(json_object_get(p, "targets")), 0,
		    "%s: no query", title);
		json_array_foreach(json_object_get(p, "targets"), j, t) {
			const char *expr = json_string_value(json_object_get(t,
			    "expr"));
			const char *ref = json_string_value(json_object_get(t,
			    "refId"));
			cr_assert(expr != NULL && ref != NULL,
			    "%s: query %zu without expr or refId", title, j);
			cr_expect(!list_has(&refs, ref), "%s: refId %s twice",
			    title, ref);
			list_add(&refs, ref, strlen(ref));
			cr_expect(on_ds_variable(t), "%s: %s's datasource",
			    title, ref);
			snprintf(what, sizeof(what), "panel %s, %s", title, ref);
			check_expr(what, expr, x, absent_ok, 1, &used,
			    problems);
		}
		list_free(&refs);
	}
	/* grid rows too: a row header has its own cells */
	json_array_foreach(json_object_get(d, "panels"), i, p) {
		const char *type = json_string_value(json_object_get(p, "type"));
		json_int_t gy = json_integer_value(json_object_get(
		    json_object_get(p, "gridPos"), "y"));
		if (type == NULL || strcmp(type, "row") != 0)
			continue;
		overlaps = 0;
		for (j = 0; j < 24 && gy >= 0 && gy < 200; j++) {
			overlaps |= grid[j][gy];
			grid[j][gy] = 1;
		}
		cr_expect(!overlaps, "row %s overlaps a panel",
		    json_string_value(json_object_get(p, "title")));
	}
	if (*absent_ok == '\0')
		check_coverage(DASHBOARD, x, &used, problems);
	json_decref(panels);
	json_decref(d);
	list_free(&used);
	list_free(&ids);
	free(text);
	free(doc);
}

/*
 * The expressions of the alerting rules (conf/prometheus/idemfcgi-rules
 * .yml), read by line: "expr: TEXT", or "expr: |" (or >) and the lines
 * indented deeper than "expr:".  Into exprs; the alert names into alerts.
 */
static void
rules_read(const char *text, list *exprs, list *alerts)
{
	const char *line, *eol, *next, *p, *end, *q;

	for (line = text; *line != '\0'; line = next) {
		size_t indent;
		eol = strchrnul(line, '\n');
		next = *eol != '\0' ? eol + 1 : eol;
		for (p = line; *p == ' '; p++)
			;
		indent = (size_t)(p - line);
		if (strncmp(p, "- alert:", 8) == 0) {
			for (p += 8; *p == ' '; p++)
				;
			list_add(alerts, p, (size_t)(eol - p));
			continue;
		}
		if (strncmp(p, "expr:", 5) != 0)
			continue;
		for (p += 5; *p == ' '; p++)
			;
		cr_assert(*p != '"' && *p != '\'', RULES ": a quoted expr: "
		    "write it plain or as a block (|)");
		if (*p != '|' && *p != '>') {
			list_add(exprs, p, (size_t)(eol - p));
			continue;
		}
		/* the block: the lines after it indented deeper, or blank */
		for (end = next; *end != '\0'; ) {
			const char *end_eol = strchrnul(end, '\n');
			for (q = end; *q == ' '; q++)
				;
			if (q != end_eol && (size_t)(q - end) <= indent)
				break;
			end = *end_eol != '\0' ? end_eol + 1 : end_eol;
		}
		list_add(exprs, next, (size_t)(end - next));
		next = end;
	}
}

/* The alerting rules: one expression per alert, each naming only metrics
 * x exports (but those starting with absent_ok); what is wrong with the
 * expressions goes to problems. */
static void
check_rules(const exported *x, const char *absent_ok, list *problems)
{
	char *text = source_file(RULES), what[200];
	list exprs = { 0 }, alerts = { 0 }, used = { 0 };
	size_t i;

	rules_read(text, &exprs, &alerts);
	cr_expect_geq(alerts.n, 8, "the alerts of " RULES);
	cr_assert_eq(exprs.n, alerts.n, RULES ": %zu alerts, %zu expr",
	    alerts.n, exprs.n);
	for (i = 0; i < exprs.n; i++) {
		snprintf(what, sizeof(what), RULES ", %s", alerts.v[i]);
		check_expr(what, exprs.v[i], x, absent_ok, 0, &used, problems);
	}
	list_free(&exprs);
	list_free(&alerts);
	list_free(&used);
	free(text);
}

/* ------------------------------------------------------- promtool */

/* "promtool check metrics" on text: its exit status (127: promtool is not
 * installed) and what it printed, into out (size bytes). */
static int
promtool_check(const char *text, char *out, size_t size)
{
	char path[] = "/tmp/idemfcgi-metrics.XXXXXX", cmd[128];
	size_t len = strlen(text), got;
	FILE *fp;
	int fd = mkstemp(path), st;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
	fp = popen(cmd, "r");
	cr_assert_not_null(fp);
	got = fread(out, 1, size - 1, fp);
	out[got] = '\0';
	st = pclose(fp);
	unlink(path);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* promtool accepts text: no error, no lint problem (nothing printed);
 * fails when promtool is not installed. */
static void
promtool_accepts(const char *text, const char *what)
{
	char out[4096];
	int st = promtool_check(text, out, sizeof(out));

	cr_assert_neq(st, 127, "promtool is not installed: scripts/deps "
	    "installs it (Debian package prometheus): %s", out);
	cr_expect(st == 0 && out[0] == '\0', "promtool check metrics, %s: "
	    "status %d: %s\n%s", what, st, out, text);
}

/* ------------------------------------------------------- instances */

static void
start(harness *h, const harness_opts *o)
{
	cr_assert_eq(harness_start(h, o), 0);
}

/* Scrapes h's metrics: the text (caller frees). */
static char *
scrape(const harness *h)
{
	char *text = harness_scrape(h);

	cr_assert_not_null(text, "GET /metrics did not answer 200");
	return text;
}

/* A POST with a key (NULL: none) and, with api, the scope header. */
static call
post(const harness *h, const char *path, const char *key, const char *body,
    int api)
{
	call c = call_make(h->addr, path, key, body);

	if (api)
		snprintf(c.extra, sizeof(c.extra), "X-Api-Key: ops");
	call_send(&c);
	return c;
}

/* A GET of path: its status. */
static int
get_status(const harness *h, const char *path)
{
	fc_response r;
	int status;

	cr_assert_eq(fc_http(h->addr, "GET", path, NULL, NULL, &r), 0);
	status = r.status;
	fc_response_free(&r);
	return status;
}

/* Scrapes h until the restart of its worker shows; the text. */
static char *
await_restart(const harness *h)
{
	char *text = NULL;
	int i;

	for (i = 0; i < 50; i++) {
		free(text);
		text = scrape(h);
		if (harness_metric(text, "idemfcgi_worker_restarts_total") >= 1 &&
		    harness_metric(text, "idemfcgi_workers") >= 1)
			break;
		call_sleep(100);
	}
	cr_expect_geq(harness_metric(text, "idemfcgi_worker_restarts_total"), 1,
	    "%s", text);
	return text;
}

/*
 * One worker on the memory store, keys scoped by X-Api-Key, 4 records at
 * most, answers of 4 KiB at most: a worker crash and restart, first
 * executions, evictions, replays, a conflict, a request in flight, a
 * missing, an invalid and an unscoped key, released 500 and 503, an
 * answer too large to store, unkeyed, unmatched and refused requests.
 * Returns the scrape after all that (caller frees).
 */
static char *
memory_instance_served_everything(harness *h)
{
	const char *bad[] = { "REQUEST_METHOD", "GET", "REQUEST_URI", "/metrics",
	    "SCRIPT_NAME", "", "REMOTE_ADDR", "10.9.8.7", NULL };
	char longkey[300], name[16], *text;
	call c, slow, dup;
	fc_response r;
	pthread_t t;
	int i;

	/* slow-request: the sleep below is a slow request */
	start(h, &(harness_opts){ .server = "slow-request = 100ms",
	    .idem = "scope = header:X-Api-Key\n"
	    "max-entries = 4\nmax-response = 4k",
	    .rest = "[metrics]\nenabled = true\n" });
	c = post(h, "/testkit/crash-once", call_key("mon-crash"), NULL, 1);
	cr_expect_eq(c.status, -1);
	free(await_restart(h));
	for (i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "mon-%d", i);
		cr_expect_eq(post(h, "/testkit/echo", call_key(name), "{\"n\":1}",
		    1).status, 201);
	}
	for (i = 0; i < 2; i++)
		cr_expect_str_eq(post(h, "/testkit/echo", call_key("mon-5"),
		    "{\"n\":1}", 1).replayed, "true");
	cr_expect_str_eq(post(h, "/testkit/echo", call_key("mon-5"),
	    "{\"n\":2}", 1).code, "IDEMPOTENCY_CONFLICT");
	cr_expect_str_eq(post(h, "/testkit/echo", NULL, NULL, 1).code,
	    "IDEMPOTENCY_KEY_MISSING");
	memset(longkey, 'a', 256);
	longkey[256] = '\0';
	cr_expect_str_eq(post(h, "/testkit/echo", longkey, NULL, 1).code,
	    "IDEMPOTENCY_KEY_INVALID");
	cr_expect_str_eq(post(h, "/testkit/echo", call_key("mon-unscoped"),
	    NULL, 0).code, "IDEMPOTENCY_SCOPE_MISSING");
	cr_expect_eq(post(h, "/testkit/fail", call_key("mon-fail"), NULL,
	    1).status, 500);
	cr_expect_eq(post(h, "/testkit/status/503", call_key("mon-503"), NULL,
	    1).status, 503);
	cr_expect_eq(post(h, "/testkit/fat-headers/1", call_key("mon-fat"),
	    NULL, 1).status, 201);
	slow = call_make(h->addr, "/testkit/sleep/800", call_key("mon-slow"),
	    NULL);
	snprintf(slow.extra, sizeof(slow.extra), "X-Api-Key: ops");
	pthread_create(&t, NULL, call_thread, &slow);
	cr_assert(harness_await_started(h, "/testkit/sleep/800",
	    call_key("mon-slow"), 1));
	dup = post(h, "/testkit/sleep/800", call_key("mon-slow"), NULL, 1);
	cr_expect_str_eq(dup.code, "IDEMPOTENCY_IN_FLIGHT");
	pthread_join(t, NULL);
	cr_expect_eq(slow.status, 201);
	cr_expect_eq(get_status(h, "/testkit/read"), 200);
	cr_expect_eq(get_status(h, "/nowhere"), 404);
	cr_expect_eq(post(h, "/idempotency", NULL, NULL, 1).status, 405);
	cr_assert_eq(fc_request_raw(h->addr, bad, NULL, 0, &r), 0);
	cr_expect_eq(r.status, 403);
	fc_response_free(&r);

	text = scrape(h);
	cr_expect_geq(harness_outcome(text, "acquired"), 10, "%s", text);
	cr_expect_geq(harness_outcome(text, "replayed"), 2);
	cr_expect_geq(harness_outcome(text, "conflict"), 1);
	cr_expect_geq(harness_outcome(text, "in_flight"), 1);
	cr_expect_geq(harness_outcome(text, "released"), 2);
	cr_expect_geq(harness_outcome(text, "key_missing"), 1);
	cr_expect_geq(harness_outcome(text, "key_invalid"), 1);
	cr_expect_geq(harness_outcome(text, "scope_missing"), 1);
	cr_expect_geq(harness_outcome(text, "answer_not_stored"), 1);
	/* each on its route */
	cr_expect_eq(harness_route_outcome(text, "POST", "/testkit/echo",
	    "acquired"), 6);
	cr_expect_eq(harness_route_outcome(text, "POST", "/testkit/echo",
	    "replayed"), 2);
	cr_expect_eq(harness_route_outcome(text, "POST", "/testkit/echo",
	    "conflict"), 1);
	cr_expect_eq(harness_route_outcome(text, "POST", "/testkit/echo",
	    "key_missing"), 1);
	cr_expect_eq(harness_route_outcome(text, "POST", "/testkit/fail",
	    "released"), 1);
	cr_expect_eq(harness_route_outcome(text, "POST",
	    "/testkit/status/{code}", "released"), 1);
	cr_expect_eq(harness_route_outcome(text, "POST", "/testkit/sleep/{ms}",
	    "in_flight"), 1);
	cr_expect_eq(harness_route_outcome(text, "POST", "/testkit/sleep/{ms}",
	    "conflict"), 0);
	cr_expect_eq(harness_route_outcome(text, "POST",
	    "/testkit/fat-headers/{n}", "answer_not_stored"), 1);
	cr_expect_eq(harness_route_outcome(text, "GET", "/testkit/read",
	    "acquired"), -1, "a read has no outcomes");
	cr_expect_geq(harness_metric(text,
	    "idemfcgi_memory_store_evictions_total"), 1);
	cr_expect_eq(harness_metric(text, "idemfcgi_worker_restarts_total"), 1);
	/* no handler answered an unknown outcome */
	cr_expect_eq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_records"), 0);
	cr_expect_eq(harness_metric(text,
	    "idemfcgi_idempotency_unknown_oldest_seconds"), 0);
	return text;
}

/* ------------------------------------------------------------ tests */

/* The names the checks compare: the metrics of an expression and nothing
 * else of it; the expressions of the rules; the series of a scrape, a
 * histogram's by its samples. */
Test(monitoring, names_read_from_promql_rules_and_scrapes)
{
	static const struct {
		const char *expr, *names;
	} cases[] = {
		{ "histogram_quantile(0.99, sum by (le, op) (rate("
		  "idemfcgi_store_duration_seconds_bucket{job=~\"$job\","
		  "instance=~\"$instance\"}[$__rate_interval])))",
		  "idemfcgi_store_duration_seconds_bucket" },
		{ "sum without (instance) (a_total) / on (job) group_left (x) b "
		  "or c offset 5m > bool 0.5e3",
		  "a_total b c" },
		{ "x{a=\"sum(rate(y[5m]))\", b='z}'} unless count(w) and "
		  "max_over_time(v[1h:5m]) > ${DS} and topk(3, u:rule)",
		  "x w v u:rule" },
		{ "idemfcgi_memory_store_in_flight > 0\nand\n"
		  "idemfcgi_memory_store_in_flight > idemfcgi_requests_in_flight - 1",
		  "idemfcgi_memory_store_in_flight idemfcgi_memory_store_in_flight "
		  "idemfcgi_requests_in_flight" },
	};
	list names = { 0 }, matchers = { 0 }, exprs = { 0 }, alerts = { 0 };
	char got[512], *p;
	exported x;
	size_t i, j;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_expect_null(promql_metrics(cases[i].expr, &names, &matchers));
		for (p = got, *p = '\0', j = 0; j < names.n; j++)
			p += sprintf(p, "%s%s", j ? " " : "", names.v[j]);
		cr_expect_str_eq(got, cases[i].names, "%s", cases[i].expr);
		cr_expect_eq(matchers.n, names.n);
		list_free(&names);
		list_free(&matchers);
	}
	cr_expect_null(promql_metrics("a{job=~\"$job\"} + b", &names,
	    &matchers));
	cr_expect_str_eq(matchers.v[0], "job=~\"$job\"");
	cr_expect_str_eq(matchers.v[1], "");
	list_free(&names);
	list_free(&matchers);
	/* a selector must name its metric */
	cr_expect_not_null(promql_metrics("rate({__name__=\"x\"}[5m])", &names,
	    &matchers));
	list_free(&names);
	list_free(&matchers);

	/* the rules' expressions: inline, and as a block up to the next key */
	rules_read("groups:\n  - name: g\n    rules:\n      - alert: A\n"
	    "        expr: up == 0\n        for: 1m\n      - alert: B\n"
	    "        expr: |\n          sum(x)\n\n            > 1\n"
	    "        labels:\n          severity: warning\n", &exprs,
	    &alerts);
	cr_expect_eq(alerts.n, 2);
	cr_expect_eq(exprs.n, 2);
	if (alerts.n == 2 && exprs.n == 2) {
		cr_expect_str_eq(alerts.v[0], "A");
		cr_expect_str_eq(alerts.v[1], "B");
		cr_expect_str_eq(exprs.v[0], "up == 0");
		cr_expect_str_eq(exprs.v[1], "          sum(x)\n\n            > 1\n");
	}
	list_free(&exprs);
	list_free(&alerts);

	exported_read(&x, "# HELP a_total A.\n# TYPE a_total counter\n"
	    "a_total{x=\"1\"} 1\n# HELP h H.\n# TYPE h histogram\n");
	cr_expect(list_has(&x.names, "a_total"));
	cr_expect(list_has(&x.names, "h_bucket"));
	cr_expect(list_has(&x.names, "h_count"));
	cr_expect(list_has(&x.names, "h_sum"));
	cr_expect(!list_has(&x.names, "h"), "a histogram's own name is no "
	    "series");
	cr_expect_eq(x.families.n, 2);
	exported_free(&x);
}

/* promtool_accepts would see a problem: a lint problem is reported (exit
 * status 3), and so is a parse error (1). */
Test(monitoring, promtool_reports_problems)
{
	char out[4096];
	int st;

	st = promtool_check("# HELP x_ms X.\n# TYPE x_ms counter\nx_ms 1\n",
	    out, sizeof(out));
	cr_assert_neq(st, 127, "promtool is not installed: scripts/deps "
	    "installs it (Debian package prometheus)");
	cr_expect_eq(st, 3, "%s", out);
	cr_expect(strstr(out, "counter metrics should have \"_total\" suffix")
	    != NULL, "%s", out);
	st = promtool_check("x{\n", out, sizeof(out));
	cr_expect_eq(st, 1, "%s", out);
	cr_expect(strstr(out, "parsing error") != NULL, "%s", out);
	st = promtool_check("# HELP x_total X.\n# TYPE x_total counter\n"
	    "x_total 1\n", out, sizeof(out));
	cr_expect_eq(st, 0, "%s", out);
	cr_expect_str_eq(out, "");
}

/* The scrape without the lines of one family (name and its samples). */
static char *
without_family(const char *text, const char *family)
{
	char *out = malloc(strlen(text) + 1), *o = out;
	const char *line, *eol;
	size_t flen = strlen(family);

	cr_assert_not_null(out);
	for (line = text; *line != '\0'; line = *eol != '\0' ? eol + 1 : eol) {
		const char *name = line;
		eol = strchrnul(line, '\n');
		if (strncmp(line, "# HELP ", 7) == 0 ||
		    strncmp(line, "# TYPE ", 7) == 0)
			name = line + 7;
		if (strncmp(name, family, flen) == 0 && (name[flen] == ' ' ||
		    name[flen] == '{'))
			continue;
		memcpy(o, line, (size_t)(eol - line));
		o += eol - line;
		*o++ = '\n';
	}
	*o = '\0';
	return out;
}

/* The memory store: promtool accepts the metrics of an instance that
 * served every kind of request; the dashboard and the alerting rules
 * name only metrics it exports, and the dashboard shows all of them. */
Test(monitoring, memory_store, .timeout = 60)
{
	list problems = { 0 };
	harness h;
	exported x;
	char *text = memory_instance_served_everything(&h), *less;

	promtool_accepts(text, "memory store");
	exported_read(&x, text);
	check_dashboard(&x, "", &problems);
	check_rules(&x, "", &problems);
	expect_none(&problems);
	exported_free(&x);
	list_free(&problems);

	/* and the checks bite: a family the instance did not export is
	 * reported wherever it is used, and as missing from the dashboard */
	less = without_family(text, "idemfcgi_memory_store_evictions_total");
	exported_read(&x, less);
	check_dashboard(&x, "", &problems);
	check_rules(&x, "", &problems);
	cr_expect(reported(&problems, "panel Memory store evictions",
	    "idemfcgi_memory_store_evictions_total is not a metric"));
	cr_expect(reported(&problems, RULES ", IdemfcgiMemoryStoreEvictions",
	    "idemfcgi_memory_store_evictions_total is not a metric"));
	exported_free(&x);
	list_free(&problems);
	free(less);
	/* and a family no panel shows */
	cr_assert_geq(asprintf(&less, "%s# HELP idemfcgi_new_total New.\n"
	    "# TYPE idemfcgi_new_total counter\nidemfcgi_new_total 0\n", text),
	    0);
	exported_read(&x, less);
	check_dashboard(&x, "", &problems);
	cr_expect(reported(&problems, DASHBOARD, "nothing shows "
	    "idemfcgi_new_total"));
	exported_free(&x);
	list_free(&problems);
	free(less);
	free(text);
	cr_expect_eq(harness_stop(&h), 0);
}

/*
 * The MySQL store: two instances on one database, inflight-ttl 1 s.  On
 * a: first executions, replays (from the replay cache too), a conflict, a
 * missing key, transactional routes (committed, replayed, rolled back on
 * 503), released 500 and 503, a worker that dies holding a key (released
 * by the master, restarted); then a slow request whose worker stops: b
 * answers a duplicate 409 in flight, then takes the key over, and a's
 * commit, once its worker runs again, is fenced.  promtool accepts both
 * instances' metrics; the dashboard and the rules name only metrics they
 * export, but the memory store's.
 */
Test(monitoring, mysql_store, .timeout = 90)
{
	const char *slow_key = call_key("mon-my-slow");
	harness a, b;
	list problems = { 0 };
	exported x;
	char *ta, *tb;
	call slow, c;
	pthread_t t;
	int pids[4], i;

	start(&a, &(harness_opts){ .mysql = 1, .server = "workers = 1\n"
	    "threads = 4\nslow-request = 100ms", .idem = "inflight-ttl = 1s",
	    .rest = "[metrics]\nenabled = true\n" });
	start(&b, &(harness_opts){ .mysql = 1, .server = "slow-request = "
	    "100ms", .idem = "inflight-ttl = 1s",
	    .rest = "[metrics]\nenabled = true\n" });
	cr_expect_eq(post(&a, "/testkit/echo", call_key("mon-my-1"), NULL,
	    0).status, 201);
	for (i = 0; i < 3; i++)
		cr_expect_str_eq(post(&a, "/testkit/echo", call_key("mon-my-1"),
		    NULL, 0).replayed, "true");
	cr_expect_str_eq(post(&a, "/testkit/echo", call_key("mon-my-1"),
	    "{\"n\":2}", 0).code, "IDEMPOTENCY_CONFLICT");
	cr_expect_str_eq(post(&a, "/testkit/echo", NULL, NULL, 0).code,
	    "IDEMPOTENCY_KEY_MISSING");
	cr_expect_eq(post(&a, "/testkit/tx/201", call_key("mon-my-tx"), NULL,
	    0).status, 201);
	cr_expect_str_eq(post(&a, "/testkit/tx/201", call_key("mon-my-tx"),
	    NULL, 0).replayed, "true");
	cr_expect_eq(post(&a, "/testkit/tx/503", call_key("mon-my-tx503"),
	    NULL, 0).status, 503);
	cr_expect_eq(post(&a, "/testkit/fail", call_key("mon-my-fail"), NULL,
	    0).status, 500);
	cr_expect_eq(post(&a, "/testkit/status/503", call_key("mon-my-503"),
	    NULL, 0).status, 503);
	c = post(&a, "/testkit/crash-once", call_key("mon-my-crash"), NULL, 0);
	cr_expect_eq(c.status, -1);
	cr_expect(harness_await_log(&a, "released 1 reservation(s) of dead"));
	free(await_restart(&a));

	slow = call_make(a.addr, "/testkit/sleep/1500", slow_key, NULL);
	pthread_create(&t, NULL, call_thread, &slow);
	cr_assert(harness_await_started(&a, "/testkit/sleep/1500", slow_key, 1));
	cr_expect_str_eq(post(&b,
 "/testkit/sleep/1500", slow_key, NULL,
	    0).code, "IDEMPOTENCY_IN_FLIGHT");
	cr_assert_eq(harness_workers(&a, pids, 4), 1);
	kill(pids[0], SIGSTOP);
	call_sleep(1300);
	c = post(&b, "/testkit/sleep/1500", slow_key, NULL, 0);
	kill(pids[0], SIGCONT);
	cr_expect_eq(c.status, 201, "%d %s", c.status, c.body_out);
	pthread_join(t, NULL);

	ta = NULL;
	for (i = 0; i < 30; i++) {
		free(ta);
		ta = scrape(&a);
		if (harness_outcome(ta, "fenced") >= 1)
			break;
		call_sleep(100);
	}
	tb = scrape(&b);
	cr_expect_geq(harness_outcome(ta, "acquired"), 5, "%s", ta);
	cr_expect_geq(harness_outcome(ta, "replayed"), 4);
	cr_expect_geq(harness_outcome(ta, "replay_cached"), 1);
	cr_expect_geq(harness_outcome(ta, "conflict"), 1);
	cr_expect_geq(harness_outcome(ta, "released"), 2);
	cr_expect_geq(harness_outcome(ta, "key_missing"), 1);
	cr_expect_eq(harness_outcome(ta, "dead_worker_released"), 1);
	cr_expect_eq(harness_outcome(ta, "fenced"), 1);
	cr_expect_eq(harness_outcome(tb, "in_flight"), 1, "%s", tb);
	cr_expect_eq(harness_outcome(tb, "taken_over"), 1);
	/* each on its route; the master's on none */
	cr_expect_geq(harness_route_outcome(ta, "POST", "/testkit/echo",
	    "replay_cached"), 1);
	cr_expect_eq(harness_route_outcome(ta, "POST", "/testkit/tx/{code}",
	    "committed"), 1);
	cr_expect_eq(harness_route_outcome(ta, "POST", "/testkit/tx/{code}",
	    "replayed"), 1);
	cr_expect_eq(harness_route_outcome(ta, "POST", "/testkit/tx/{code}",
	    "released"), 1);
	cr_expect_eq(harness_route_outcome(ta, "", "", "dead_worker_released"),
	    1); 
	cr_expect_eq(harness_route_outcome(ta, "POST", "/testkit/sleep/{ms}",
	    "fenced"), 1);
	cr_expect_eq(harness_route_outcome(tb, "POST", "/testkit/sleep/{ms}",
	    "taken_over"), 1);
	cr_expect_eq(harness_route_outcome(tb, "POST", "/testkit/sleep/{ms}",
	    "in_flight"), 1);
	cr_expect_eq(harness_metric(ta, "idemfcgi_memory_store_entries"), -1);
	/* the table's records of unknown outcome, on either instance */
	cr_expect_geq(harness_metric(ta,
	    "idemfcgi_idempotency_unknown_records"), 0);
	cr_expect_geq(harness_metric(tb,
	    "idemfcgi_idempotency_unknown_oldest_seconds"), 0);

	promtool_accepts(ta, "MySQL store, the instance that was fenced");
	promtool_accepts(tb, "MySQL store, the instance that took over");
	exported_read(&x, ta);
	check_dashboard(&x, "idemfcgi_memory_store_", &problems);
	check_rules(&x, "idemfcgi_memory_store_", &problems);
	expect_none(&problems);
	exported_free(&x);
	list_free(&problems);
	free(ta);
	free(tb);
	harness_stop(&b);
	harness_stop(&a);
}
