/*
 * idem_parse.c - scalar values: sizes, durations, booleans, integers.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "idem_parse.h"


/* Parses an unsigned decimal at s; sets *end after it.  IDEM_ERR_INVALID on
 * no digits or overflow. */
static idem_err
parse_u64(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;

	if (!isdigit((unsigned char)*s))
		return IDEM_ERR_INVALID;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return IDEM_ERR_INVALID;
		v = v * 10 + d;
	}
	*end = s;
	*out = v;
	return IDEM_OK;
}

/* *out = a * b.  Returns IDEM_OK, or IDEM_ERR_INVALID on overflow. */
static idem_err
mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	if (b != 0 && a > UINT64_MAX / b)
		return IDEM_ERR_INVALID;
	*out = a * b;
	return IDEM_OK;
}

/* A size in bytes with an optional k, m or g (no b).  Returns IDEM_OK or
 * IDEM_ERR_INVALID. */
idem_err
idem_parse_size(const char *s, uint64_t *out)
{
	const char *p;
	uint64_t v, mult = 1;

	if (s == NULL || parse_u64(s, &p, &v) != IDEM_OK)
		return IDEM_ERR_INVALID;
	switch (tolower((unsigned char)*p)) {
	case '\0': break;
	case 'k': mult = 1024ULL; p++; break;
	case 'm': mult = 1024ULL * 1024; p++; break;
	case 'g': mult = 1024ULL * 1024 * 1024; p++; break;
	default: return IDEM_ERR_INVALID;
	}
	/* no "1MB": whether a B means 10^6 or 2^20 is not for us to guess */
	if (*p != '\0')
		return IDEM_ERR_INVALID;
	return mul_u64(v, mult, out);
}

/* ISO-8601 duration: P[nD or nW][T[nH][nM][n[.fff]S]], no years or months.
 * Returns IDEM_OK with *out in ms, or IDEM_ERR_INVALID. */
static idem_err
parse_iso_duration(const char *s, uint64_t *out)
{
	const char *p = s + 1;
	uint64_t total = 0, v, part;
	int in_time = 0, any = 0;
	char last = 0;

	while (*p != '\0') {
		uint64_t frac_ms = 0;
		char unit;

		if (*p == 'T') {
			if (in_time)
				return IDEM_ERR_INVALID;
			in_time = 1;
			p++;
			continue;
		}
		if (parse_u64(p, &p, &v) != IDEM_OK)
			return IDEM_ERR_INVALID;
		if (*p == '.' || *p == ',') {
			/* fractions only on seconds, to the millisecond */
			unsigned digits = 0;
			for (p++; isdigit((unsigned char)*p); p++, digits++)
				if (digits < 3)
					frac_ms = frac_ms * 10 + (uint64_t)(*p - '0');
			if (digits == 0)
				return IDEM_ERR_INVALID;
			for (; digits < 3; digits++)
				frac_ms *= 10;
			if (*p != 'S')
				return IDEM_ERR_INVALID;
		}
		unit = *p++;
		if (!in_time && unit == 'D' && last == 0)
			part = 86400000ULL;
		else if (!in_time && unit == 'W' && last == 0)
			part = 7 * 86400000ULL;
		else if (in_time && unit == 'H' && last != 'H' && last != 'M' &&
		    last != 'S')
			part = 3600000ULL;
		else if (in_time && unit == 'M' && last != 'M' && last != 'S')
			part = 60000ULL;
		else if (in_time && unit == 'S' && last != 'S')
			part = 1000ULL;
		else
			return IDEM_ERR_INVALID;
		if (mul_u64(v, part, &v) != IDEM_OK || v + frac_ms < v ||
		    total + v + frac_ms < total)
			return IDEM_ERR_INVALID;
		total += v + frac_ms;
		last = unit;
		any = 1;
	}
	if (!any || (in_time && (last == 'D' || last == 'W')))
		return IDEM_ERR_INVALID;
	*out = total;
	return IDEM_OK;
}

/* Writes ms as "PT..H..M..S" into buf.  Returns buf. */
char *
idem_format_iso_duration(uint64_t ms, char *buf, size_t size)
{
	uint64_t h = ms / 3600000, m = ms / 60000 % 60, sec = ms / 1000 % 60;
	size_t n = (size_t)snprintf(buf, size, "PT");

	if (h > 0 && n < size)
		n += (size_t)snprintf(buf + n, size - n, "%lluH",
		    (unsigned long long)h);
	if (m > 0 && n < size)
		n += (size_t)snprintf(buf + n, size - n, "%lluM",
		    (unsigned long long)m);
	if ((sec > 0 || ms % 1000 > 0 || ms == 0) && n < size) {
		if (ms % 1000 > 0)
			snprintf(buf + n, size - n, "%llu.%03lluS",
			    (unsigned long long)sec,
			    (unsigned long long)(ms % 1000));
		else
			snprintf(buf + n, size - n, "%lluS",
			    (unsigned long long)sec);
	}
	return buf;
}

/* A duration with a unit (ms, s, m, min, h, d) or in ISO-8601, or a bare
 * 0.  Returns IDEM_OK with *out_ms, or IDEM_ERR_INVALID. */
idem_err
idem_parse_duration(const char *s, uint64_t *out_ms)
{
	const char *p;
	uint64_t v, mult;

	if (s == NULL || *s == '\0')
		return IDEM_ERR_INVALID;
	if (*s == 'P')
		return parse_iso_duration(s, out_ms);
	if (parse_u64(s, &p, &v) != IDEM_OK)
		return IDEM_ERR_INVALID;
	if (strcmp(p, "ms") == 0)
		mult = 1;
	else if (strcmp(p, "s") == 0)
		mult = 1000;
	else if (strcmp(p, "m") == 0 || strcmp(p, "min") == 0)
		mult = 60000;
	else if (strcmp(p, "h") == 0)
		mult = 3600000;
	else if (strcmp(p, "d") == 0)
		mult = 86400000;
	else if (*p == '\0' && v == 0)
		mult = 1; /* a bare 0 needs no unit */
	else
		return IDEM_ERR_INVALID;
	return mul_u64(v, mult, out_ms);
}

/* A yes/no word.  Returns IDEM_OK with *out 1 or 0, or IDEM_ERR_INVALID. */
idem_err
idem_parse_bool(const char *s, int *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	size_t i;

	if (s == NULL)
		return IDEM_ERR_INVALID;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return IDEM_OK;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return IDEM_OK;
		}
	}
	return IDEM_ERR_INVALID;
}

/* A whole decimal in [min, max].  Returns IDEM_OK or IDEM_ERR_INVALID. */
const char *
idem_parse_int_want(long long min, long long max, char *buf, size_t size)
{
	snprintf(buf, size, "expected a whole number from %lld to %lld", min,
	    max);
	return buf;
}

idem_err
idem_parse_int(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
		return IDEM_ERR_INVALID;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return IDEM_ERR_INVALID;
	*out = v;
	return IDEM_OK;
}


/* One "HOST[:PORT]" or "[IPV6][:PORT]" word of len bytes into e.  Returns
 * NULL or why not. */
static const char *
parse_host(const char *w, size_t len, unsigned def_port, idem_endpoint *e)
{
	const char *host = w, *port = NULL;
	size_t hlen = len, i;
	long long p;
	char num[8];

	if (w[0] == '[') {
		const char *close = memchr(w, ']', len);
		if (close == NULL)
			return "an IPv6 address is written [ADDR] or [ADDR]:PORT";
		host = w + 1;
		hlen = (size_t)(close - w) - 1;
		if (close + 1 < w + len) {
			if (close[1] != ':')
				return "an IPv6 address is written [ADDR]:PORT";
			port = close + 2;
		}
	} else {
		const char *colon = memchr(w, ':', len);
		if (colon != NULL) {
			hlen = (size_t)(colon - w);
			port = colon + 1;
		}
	}
	if (hlen == 0 || hlen >= IDEM_HOST_MAX)
		return "a host name is 1 to 255 bytes";
	for (i = 0; i < hlen; i++)
		if (!isalnum((unsigned char)host[i]) && host[i] != '.' &&
		    host[i] != '-' && host[i] != '_' && host[i] != ':')
			return "a host is a name or an address";
	e->port = def_port;
	if (port != NULL) {
		size_t plen = (size_t)(w + len - port);
		if (plen == 0 || plen >= sizeof(num))
			return "a port is a number from 1 to 65535";
		memcpy(num, port, plen);
		num[plen] = '\0';
		if (idem_parse_int(num, 1, 65535, &p) != IDEM_OK)
			return "a port is a number from 1 to 65535";
		e->port = (unsigned)p;
	}
	memcpy(e->host, host, hlen);
	e->host[hlen] = '\0';
	e->socket[0] = '\0';
	return NULL;
}

/* Whether e[n] names the same server as one of e[0..n-1]. */
static int
listed(const idem_endpoint *e, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (e[i].port == e[n].port && strcmp(e[i].socket, e[n].socket) ==
		    0 && strcasecmp(e[i].host, e[n].host) == 0)
			return 1;
	return 0;
}

const char *
idem_parse_endpoints(const char *s, int sockets, unsigned def_port,
    idem_endpoint *out, size_t *n)
{
	const char *w = s, *why;
	size_t len;

	*n = 0;
	for (;;) {
		while (*w == ' ' || *w == '\t')
			w++;
		if (*w == '\0')
			break;
		len = strcspn(w, " \t");
		if (*n == IDEM_ENDPOINTS_MAX)
			return "at most 8 servers";
		memset(&out[*n], 0, sizeof(out[*n]));
		if (sockets) {
			if (w[0] != '/' || len >= sizeof(out[*n].socket))
				return "a socket is an absolute path of at most 107 "
				    "bytes";
			memcpy(out[*n].socket, w, len);
			out[*n].socket[len] = '\0';
		} else if ((why = parse_host(w, len, def_port, &out[*n])) != NULL)
			return why;
		if (listed(out, *n))
			return "a server is listed twice";
		(*n)++;
		w += len;
	}
	return *n > 0 ? NULL : "an empty list";
}
