/*
 * calls.h - HTTP-like POSTs over FastCGI for the end-to-end tests, one at a
 * time or many at once, with the parts of the answer the tests look at.
 */
#ifndef CALLS_H
#define CALLS_H

typedef struct call {
	const char *addr;         /* the idemfcgi to send to */
	const char *path;
	char key_header[300];     /* "Idempotency-Key: K", or "" */
	char extra[128];          /* another "Name: value" header, or "" */
	const char *body;
	long delay_ms;            /* wait before sending */
	/* results */
	int status;               /* -1: no answer (connection failed) */
	char replayed[8];         /* Idempotent-Replayed */
	char code[64];            /* the problem code, if any */
	char exec[40];            /* testkit's exec id, if any */
	char location[160];       /* Location, or "" */
	char content_location[160]; /* Content-Location, or "" */
	char body_out[512];
} call;

/* A POST of body (NULL: "{}") to path with key (NULL: none) to addr. */
call call_make(const char *addr, const char *path, const char *key,
    const char *body);
/* Sends c and fills its results. */
void call_send(call *c);
/* call_send for pthread_create: arg is a call *. */
void *call_thread(void *arg);
/* call_make and call_send. */
call call_one(const char *addr, const char *path, const char *key,
    const char *body);
/* Sends the n calls at once (a thread each) and waits for all. */
void call_all(call *calls, int n);
/* "NAME-PID": a key unique to this test run (databases outlive a run).
 * Eight calls in a row get eight distinct buffers. */
const char *call_key(const char *name);
/* Sleeps ms milliseconds. */
void call_sleep(long ms);

#endif
