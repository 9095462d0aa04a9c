/*
 * idem_time.c - monotonic time and random ids.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <uuid.h>

#include "idem_time.h"

uint64_t
idem_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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
idem_deadline(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	idem_timespec_add(ts, ms);
}

void
idem_random_id(char out[17])
{
	uuid_t u;
	int i;

	uuid_generate_random(u);
	for (i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", u[i]);
}
