/*
 * idem_log.c - log lines on stderr, as text or JSON.
 */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "idem_log.h"

/* A line's route: its method and template (a template is at most 4096
 * bytes, IDEM_MAX_PATH; a longer one is cut) */
#define LOG_ROUTE_MAX (4096 + 16)

static _Atomic int log_level = IDEM_LOG_INFO;
static _Atomic int log_format = IDEM_LOG_TEXT;
static _Atomic int log_fd = 2;
static const char *log_name = "idemfcgi";

const char *const idem_log_level_names[IDEM_LOG__MAX] = {
	[IDEM_LOG_DEBUG] = "debug",
	[IDEM_LOG_INFO] = "info",
	[IDEM_LOG_WARN] = "warn",
	[IDEM_LOG_ERROR] = "error",
};

const char *const idem_log_format_names[IDEM_LOG_FORMAT__MAX] = {
	[IDEM_LOG_TEXT] = "text",
	[IDEM_LOG_JSON] = "json",
};

void
idem_log_set_level(idem_log_level level)
{
	log_level = (int)level;
}

void
idem_log_set_format(idem_log_format format)
{
	log_format = (int)format;
}

void
idem_log_set_name(const char *name)
{
	log_name = name;
}

int
idem_log_set_fd(int fd)
{
	int old = log_fd;

	log_fd = fd;
	return old;
}

/* Copies src into dst[0..size) escaping control characters, and with ascii
 * set every byte over 0x7e, as \xNN; returns the length written (truncated
 * to fit). */
static size_t
escape(char *dst, size_t size, const char *src, int ascii)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	for (; *src != '\0' && n + 5 < size; src++) {
		unsigned char c = (unsigned char)*src;
		if (c < 0x20 || c == 0x7f || (ascii && c > 0x7e)) {
			dst[n++] = '\\';
			dst[n++] = 'x';
			dst[n++] = hex[c >> 4];
			dst[n++] = hex[c & 15];
		} else {
			dst[n++] = (char)c;
		}
	}
	dst[n] = '\0';
	return n;
}

/* The syslog priority of each level, for the journal's "<N>" prefixes. */
static const int level_priorities[IDEM_LOG__MAX] = {
	[IDEM_LOG_DEBUG] = 7,
	[IDEM_LOG_INFO] = 6,
	[IDEM_LOG_WARN] = 4,
	[IDEM_LOG_ERROR] = 3,
};

static int journal_stderr;
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;

/* Whether stderr is the journal's stream: $JOURNAL_STREAM ("DEV:INODE",
 * set by systemd) names the file fd 2 is. */
static void
read_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char end;

	if (env == NULL || sscanf(env, "%llu:%llu%c", &dev, &ino, &end) != 2 ||
	    fstat(2, &st) != 0)
		return;
	journal_stderr = (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

/* Whether lines go to the journal: they then start with their priority
 * ("<3>") and leave the time to it. */
static int
to_journal(void)
{
	pthread_once(&journal_once, read_journal);
	return journal_stderr && log_fd == 2;
}

static char host[256] = "-";
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

/* Reads this machine's name once. */
static void
read_host(void)
{
	if (gethostname(host, sizeof(host) - 1) != 0)
		strcpy(host, "-");
	host[sizeof(host) - 1] = '\0';
}

/* This machine's name, for JSON lines. */
static const char *
host_name(void)
{
	pthread_once(&host_once, read_host);
	return host;
}

/* Adds key: value to obj when value is not NULL; text that is not UTF-8
 * goes in escaped.  Returns 0 or -1. */
static int
json_put(json_t *obj, const char *key, const char *value)
{
	json_t *s;

	if (value == NULL)
		return 0;
	if ((s = json_string(value)) == NULL) {
		char esc[4096];
		escape(esc, sizeof(esc), value, 1);
		s = json_string(esc);
	}
	return json_object_set_new(obj, key, s);
}

/* One JSON object line into line; returns its length without the newline,
 * or 0 when out of memory. */
static size_t
json_line(char *line, size_t size, const char *stamp, int lvl,
    const idem_log_ctx *c, const char *msg)
{
	json_t *obj = json_object();
	char route[LOG_ROUTE_MAX];
	size_t n = 0;
	int bad;

	if (obj == NULL)
		return 0;
	route[0] = '\0';
	if (c->method != NULL && c->route != NULL)
		snprintf(route, sizeof(route), "%s %s", c->method, c->route);
	bad = json_put(obj, "time", stamp) | json_put(obj, "level",
	    idem_log_level_names[lvl]) | json_put(obj, "host", host_name()) |
	    json_object_set_new(obj, "pid",
	    json_integer((json_int_t)getpid())) |
	    json_put(obj, "request_id", c->request_id) |
	    json_put(obj, "route", route[0] != '\0' ? route : NULL) |
	    json_put(obj, "key_hash", c->key_hash) |
	    json_put(obj, "event", c->event) |
	    json_put(obj, "owner", c->owner) | json_put(obj, "msg", msg);
	if (bad == 0)
		n = json_dumpb(obj, line, size - 1, JSON_COMPACT);
	json_decref(obj);
	/* too long for the buffer: json_dumpb says how much it needed */
	return n < size - 1 ? n : 0;
}

/* Formats and writes one line. */
static void
logv_ctx(const idem_log_ctx *c, idem_log_level level, const char *fmt,
    va_list ap)
{
	static const idem_log_ctx none;
	char msg[2048], line[8192], stamp[40];
	struct timeval tv;
	struct tm tm;
	size_t n, pre = 0;
	int lvl = (int)level, journal = to_journal();

	if (lvl < log_level)
		return;
	if (lvl < 0 || lvl >= IDEM_LOG__MAX)
		lvl = IDEM_LOG_ERROR;
	if (c == NULL)
		c = &none;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(stamp + n, sizeof(stamp) - n, ".%03ldZ",
	    (long)(tv.tv_usec / 1000));
	if (journal)
		pre = (size_t)snprintf(line, sizeof(line), "<%d>",
		    level_priorities[lvl]);
	if (log_format == IDEM_LOG_JSON && (n = json_line(line + pre,
	    sizeof(line) - pre, stamp, lvl, c, msg)) > 0) {
		n += pre;
		line[n++] = '\n';
		if (write(log_fd, line, n) < 0)
			return;
		return;
	}
	if (journal)
		n = pre + (size_t)snprintf(line + pre, sizeof(line) - pre,
		    "%s[%ld] %s ", log_name, (long)getpid(),
		    idem_log_level_names[lvl]);
	else
		n = (size_t)snprintf(line, sizeof(line), "%s %s[%ld] %s ",
		    stamp, log_name, (long)getpid(), idem_log_level_names[lvl]);
	if (c->request_id != NULL)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "req=%s ",
		    c->request_id);
	if (c->method != NULL && c->route != NULL && n < sizeof(line) - 8) {
		n += (size_t)snprintf(line + n, sizeof(line) - n, "route=\"%s ",
		    c->method);
		if (n < sizeof(line) - 8)
			n += escape(line + n, sizeof(line) - n - 4, c->route,
			    0);
		n += (size_t)snprintf(line + n, sizeof(line) - n, "\" ");
	}
	if (c->key_hash != NULL && n < sizeof(line) - 32)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "key=%s ",
		    c->key_hash);
	if (c->event != NULL && n < sizeof(line) - 64)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "event=%s ",
		    c->event);
	if (c->owner != NULL && n < sizeof(line) - 128)
		n += (size_t)snprintf(line + n, sizeof(line) - n, "owner=%s ",
		    c->owner);
	if (n >= sizeof(line) - 4)
		n = sizeof(line) - 4;
	if (c->request_id != NULL || c->route != NULL || c->key_hash != NULL ||
	    c->event != NULL || c->owner != NULL) {
		line[n - 1] = ':';
		line[n++] = ' ';
	}
	n += escape(line + n, sizeof(line) - n - 1, msg, 0);
	line[n++] = '\n';
	/* one write per line; a short write to a pipe is not retried */
	if (write(log_fd, line, n) < 0)
		return;
}

void
idem_log_at(const idem_log_ctx *ctx, idem_log_level level, const char *fmt,
    ...)
{
	va_list ap;

	va_start(ap, fmt);
	logv_ctx(ctx, level, fmt, ap);
	va_end(ap);
}

void
idem_logv_at(const idem_log_ctx *ctx, idem_log_level level, const char *fmt,
    va_list ap)
{
	logv_ctx(ctx, level, fmt, ap);
}

int
idem_log_enabled(idem_log_level level)
{
	return (int)level >= log_level;
}
