/*
 * idem_parse.h - the scalar values of the configuration: whole numbers,
 * booleans, sizes and durations.  The key table of idem_config uses them,
 * and so does the plugin API (idem_app_config_int and friends), so a value
 * means the same in every section.  Each parser takes the whole string:
 * no blanks around it, nothing after it; a bad value is IDEM_ERR_INVALID
 * and *out is left alone.
 */
#ifndef IDEM_PARSE_H
#define IDEM_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include "idemfcgi.h"

/* "64k" -> 65536: a decimal number with an optional k, m or g (powers of
 * 1024, in any case); "1MB", "1kb" and "512b" are refused.  Returns IDEM_OK or IDEM_ERR_INVALID (also on
 * overflow and for NULL). */
idem_err idem_parse_size(const char *s, uint64_t *out);

/* "500ms", "30s", "5m", "24h", "2d", "PT1H30M", "P1D", "0" -> ms.  ISO-8601
 * durations take days, weeks, hours, minutes and seconds (fractions of a
 * second to the millisecond), no years or months.  Returns IDEM_OK or
 * IDEM_ERR_INVALID (also on overflow and for NULL). */
idem_err idem_parse_duration(const char *s, uint64_t *out_ms);

/* ms as an ISO-8601 duration in hours, minutes and seconds, the way
 * java.time.Duration writes it: 86400000 -> "PT24H", 1500 -> "PT1.500S".
 * Returns buf (truncated to size). */
char *idem_format_iso_duration(uint64_t ms, char *buf, size_t size);

/* "true|yes|on|1" -> 1, "false|no|off|0" -> 0, in any case.  Returns
 * IDEM_OK or IDEM_ERR_INVALID. */
idem_err idem_parse_bool(const char *s, int *out);

/* What the parsers take, for the messages of the config and of the plugin
 * API alike ("bad value \"x\": <this>"). */
#define IDEM_PARSE_BOOL_WANT "expected true or false"
#define IDEM_PARSE_SIZE_WANT "expected a size such as 512, 64k or 1m: " \
	"bytes, or k, m or g for KiB, MiB or GiB (without a B: 1m, not 1MB)"
#define IDEM_PARSE_DURATION_WANT "expected a duration such as 500ms, 30s, " \
	"5m, 24h or PT30M"

/* Writes what idem_parse_int over [min, max] takes into buf ("expected a
 * whole number from MIN to MAX").  Returns buf. */
const char *idem_parse_int_want(long long min, long long max, char *buf,
    size_t size);

/* A whole decimal integer in [min, max], optionally signed, no blanks.
 * Returns IDEM_OK or IDEM_ERR_INVALID. */
idem_err idem_parse_int(const char *s, long long min, long long max,
    long long *out);

/* Most database hosts (or sockets) of [mysql] host and socket. */
#define IDEM_ENDPOINTS_MAX 8
/* Longest host name or address of an endpoint, with its NUL. */
#define IDEM_HOST_MAX 256

/* One database server of a list: a host and port, or a unix socket. */
typedef struct idem_endpoint {
	char host[IDEM_HOST_MAX];   /* "" for a socket */
	unsigned port;              /* 0 for a socket */
	char socket[108];           /* "" for a host */
} idem_endpoint;

/*
 * A list of database servers separated by blanks: "HOST", "HOST:PORT",
 * "[IPV6]" or "[IPV6]:PORT" each (def_port when none is given), or with
 * sockets set, absolute socket paths.  Fills out[0..*n) (at most
 * IDEM_ENDPOINTS_MAX).  Returns NULL, or why not (static text).
 */
const char *idem_parse_endpoints(const char *s, int sockets,
    unsigned def_port, idem_endpoint *out, size_t *n);

#endif
