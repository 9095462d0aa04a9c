/*
 * calls.c - concurrent FastCGI calls for the tests.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "calls.h"
#include "fcgi_client.h"

void
call_sleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

const char *
call_key(const char *name)
{
	static __thread char buf[8][96];
	static __thread int i;
	char *out = buf[i++ % 8];

	snprintf(out, 96, "%s-%ld", name, (long)getpid());
	return out;
}

call
call_make(const char *addr, const char *path, const char *key,
    const char *body)
{
	call c;

	memset(&c, 0, sizeof(c));
	c.addr = addr;
	c.path = path;
	if (key != NULL)
		snprintf(c.key_header, sizeof(c.key_header),
		    "Idempotency-Key: %s", key);
	c.body = body != NULL ? body : "{}";
	return c;
}

void
call_send(call *c)
{
	const char *hdr[4] = { NULL, NULL, NULL, NULL };
	fc_response r;
	json_error_t e;
	json_t *j;
	int n = 0;
	const char *v;

	if (c->delay_ms > 0)
		call_sleep(c->delay_ms);
	if (c->key_header[0] != '\0')
		hdr[n++] = c->key_header;
	if (c->extra[0] != '\0')
		hdr[n++] = c->extra;
	hdr[n++] = "Content-Type: application/json";
	c->status = -1;
	c->replayed[0] = c->code[0] = c->exec[0] = c->body_out[0] = '\0';
	c->location[0] = c->content_location[0] = '\0';
	if (fc_http(c->addr, "POST", c->path, hdr, c->body, &r) != 0)
		return;
	c->status = r.status;
	v = fc_header(&r, "Idempotent-Replayed");
	snprintf(c->replayed, sizeof(c->replayed), "%s", v != NULL ? v : "");
	v = fc_header(&r, "Location");
	snprintf(c->location, sizeof(c->location), "%s", v != NULL ? v : "");
	v = fc_header(&r, "Content-Location");
	snprintf(c->content_location, sizeof(c->content_location), "%s",
	    v != NULL ? v : "");
	snprintf(c->body_out, sizeof(c->body_out), "%s", r.body);
	if ((j = json_loads(r.body, 0, &e)) != NULL) {
		json_t *x = json_object_get(j, "exec");
		json_t *code = json_object_get(j, "code");
		if (json_is_string(x))
			snprintf(c->exec, sizeof(c->exec), "%s",
			    json_string_value(x));
		if (json_is_string(code))
			snprintf(c->code, sizeof(c->code), "%s",
			    json_string_value(code));
		json_decref(j);
	}
	fc_response_free(&r);
}

call
call_one(const char *addr, const char *path, const char *key,
    const char *body)
{
	call c = call_make(addr, path, key, body);

	call_send(&c);
	return c;
}

void *
call_thread(void *arg)
{
	call_send(arg);
	return NULL;
}

void
call_all(call *calls, int n)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	int i;

	for (i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, call_thread, &calls[i]) != 0)
			call_send(&calls[i]);
	for (i = 0; i < n; i++)
		if (t[i] != 0)
			pthread_join(t[i], NULL);
	free(t);
}
