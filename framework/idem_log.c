/*
 * idem_log.c - log lines on stderr.
 */
#include "config.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "idem_log.h"
#include "idem_request.h"

static _Atomic int log_level = IDEM_LOG_INFO;
static _Atomic int log_fd = 2;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void
idem_log_set_level(idem_log_level level)
{
	log_level = (int)level;
}

int
idem_log_set_fd(int fd)
{
	int old = log_fd;

	log_fd = fd;
	return old;
}

/* Copies src into dst[0..size) escaping control characters as \xNN;
 * returns the length written (truncated to fit). */
static size_t
escape(char *dst, size_t size, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	for (; *src != '\0' && n + 4 < size; src++) {
		unsigned char c = (unsigned char)*src;
		if (c < 0x20 || c == 0x7f) {
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

/* Formats and writes one line; request_id may be NULL. */
static void
logv_id(const char *request_id, idem_log_level level, const char *fmt,
    va_list ap)
{
	char msg[2048], line[4096];
	struct timeval tv;
	struct tm tm;
	size_t n;
	int lvl = (int)level;

	if (lvl < log_level)
		return;
	if (lvl < 0 || lvl > IDEM_LOG_ERROR)
		lvl = IDEM_LOG_ERROR;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ idemfcgi[%ld] %s ",
	    (long)(tv.tv_usec / 1000), (long)getpid(), level_names[lvl]);
	if (request_id != NULL && n < sizeof(line))
		n += (size_t)snprintf(line + n, sizeof(line) - n, "req=%s: ",
		    request_id);
	if (n >= sizeof(line) - 2)
		n = sizeof(line) - 2;
	n += escape(line + n, sizeof(line) - n - 1, msg);
	line[n++] = '\n';
	/* one write per line; a short write to a pipe is not retried */
	if (write(log_fd, line, n) < 0)
		return;
}

void
idem_log(const idem_request *req, idem_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	logv_id(req != NULL ? req->request_id : NULL, level, fmt, ap);
	va_end(ap);
}
