/*
 * idem_time.c - monotonic time and random ids.
 */
#include "config.h"

#include <errno.h>

#include <stdio.h>

#include <string.h>
#include <sys/random.h>

#include <uuid.h>

#include "idem_time.h"

/* Milliseconds of clock id. */
static uint64_t
clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
idem_now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

uint64_t
idem_boot_ms(void)
{
	return clock_ms(CLOCK_BOOTTIME);
}

void
idem_timespec_add(struct timespec *ts, uint64_t ms)
{
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void
idem_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void
idem_deadline(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	idem_timespec_add(ts, ms);
}

/* Fills buf with n random bytes (getrandom, or libuuid when it fails). */
static void
random_bytes(unsigned char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = getrandom(buf + got, n - got, 0);
		if (r <= 0) {
			uuid_t u;
			uuid_generate_random(u);
			memcpy(buf + got, u, n - got < 16 ? n - got : 16);
			got += n - got < 16 ? n - got : 16;
			continue;
		}
		got += (size_t)r;
	}
}

/* Writes n bytes as 2n hex digits. */
static char *
hex(char *out, const unsigned char *b, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		*out++ = digits[b[i] >> 4];
		*out++ = digits[b[i] & 15];
	}
	return out;
}

void
idem_random_id(char out[17])
{
	unsigned char b[8];

	random_bytes(b, sizeof(b));
	*hex(out, b, sizeof(b)) = '\0';
}

void
idem_random_hex(char *out, size_t n)
{
	unsigned char b[32];

	if (n > sizeof(b))
		n = sizeof(b);
	random_bytes(b, n);
	*hex(out, b, n) = '\0';
}

void
idem_uuid4(char out[37])
{
	unsigned char b[16];
	char *p = out;

	random_bytes(b, sizeof(b));
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);   /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);   /* variant 10 */
	p = hex(p, b, 4);
	*p++ = '-';
	p = hex(p, b + 4, 2);
	*p++ = '-';
	p = hex(p, b + 6, 2);
	*p++ = '-';
	p = hex(p, b + 8, 2);
	*p++ = '-';
	p = hex(p, b + 10, 6);
	*p = '\0';
}

char *
idem_utc_offset(int64_t offset_ms, char *buf, size_t size)
{
	time_t sec = time(NULL) + (time_t)(offset_ms / 1000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	if (strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0 && size > 0)
		buf[0] = '\0';
	return buf;
}

char *
idem_mono_to_utc(uint64_t mono_ms, char *buf, size_t size)
{
	struct timespec rt;
	int64_t wall_ms;
	time_t sec;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &rt);
	wall_ms = (int64_t)rt.tv_sec * 1000 + rt.tv_nsec / 1000000 -
	    ((int64_t)idem_now_ms() - (int64_t)mono_ms);
	sec = (time_t)(wall_ms / 1000);
	gmtime_r(&sec, &tm);
	n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, size - n, ".%03d000Z", (int)(wall_ms % 1000));
	return buf;
}
