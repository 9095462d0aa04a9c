/*
 * idem_time.h - the monotonic clock every timeout, lease and back-off of a
 * process is measured with (never the wall clock; stores use their own).
 */
#ifndef IDEM_TIME_H
#define IDEM_TIME_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t idem_now_ms(void);

/* Milliseconds of CLOCK_BOOTTIME: like CLOCK_MONOTONIC, but it also runs
 * while the machine is suspended (for what must expire in real time). */
uint64_t idem_boot_ms(void);

/* *ts = CLOCK_MONOTONIC now + ms (for pthread_cond_timedwait on a
 * condition variable set to CLOCK_MONOTONIC). */
void idem_deadline(struct timespec *ts, uint64_t ms);

/* Adds ms to *ts. */
void idem_timespec_add(struct timespec *ts, uint64_t ms);

/* Sleeps ms milliseconds, through signals. */
void idem_sleep_ms(long ms);

/* The wall-clock time of a CLOCK_MONOTONIC instant mono_ms, as UTC
 * "2026-11-30T07:25:05.123000Z" in buf (at least 32 bytes).  Returns buf. */
char *idem_mono_to_utc(uint64_t mono_ms, char *buf, size_t size);

/* The wall-clock time offset_ms from now (negative: before), as UTC
 * "2026-11-30T07:25:05Z" in buf (at least 24 bytes).  Returns buf. */
char *idem_utc_offset(int64_t offset_ms, char *buf, size_t size);

/* 16 random hex digits and a NUL: instance ids. */
void idem_random_id(char out[17]);

/* 2 * n random hex digits and a NUL, from one read of n random bytes
 * (n at most 32). */
void idem_random_hex(char *out, size_t n);

/* A random (version 4) UUID in its 36-character form and a NUL.  From
 * getrandom(2): libuuid's generator reseeds random(3) on every call, a
 * sixth of a request's instructions. */
void idem_uuid4(char out[37]);

#endif
