/*
 * rdceil.c - the Redis store's ceiling: N connections, each sending the
 * reserve script then the commit script for a new key, as many pairs as
 * it can for SECS seconds, the scripts the store's own
 * (idem_store_redis_lua.c), called by their SHA-1 as it calls them.
 * Prints pairs per second.
 *
 *   rdceil PORT CONNECTIONS SECS
 *   rdceil --script reserve|commit   prints that script's text
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "idem_store_redis_int.h"

static int port, secs;
static atomic_ullong pairs;
static char sha_reserve[41], sha_commit[41];

/* Loads script i on c into sha; exits on failure. */
static void
load(redisContext *c, size_t i, char sha[41])
{
	redisReply *r = redisCommand(c, "SCRIPT LOAD %s", idem_rds_lua[i]);

	if (r == NULL || r->type != REDIS_REPLY_STRING || r->len != 40) {
		fprintf(stderr, "rdceil: SCRIPT LOAD failed\n");
		exit(1);
	}
	memcpy(sha, r->str, 41);
	freeReplyObject(r);
}

/* One connection's loop: reserve and commit new keys until the end. */
static void *
worker(void *arg)
{
	long id = (long)arg, n = 0;
	redisContext *c = redisConnect("127.0.0.1", port);
	char name[160], index[64], member[128], owner[32];
	const char *fp = "0123456789abcdef0123456789abcdef";
	time_t end = time(NULL) + secs;
	redisReply *r;

	if (c == NULL || c->err != 0) {
		fprintf(stderr, "rdceil: cannot connect\n");
		exit(1);
	}
	snprintf(owner, sizeof(owner), "ceil.%ld", id);
	while (time(NULL) < end) {
		unsigned b = (unsigned)(id * 7919 + n) % RDS_BUCKETS;
		snprintf(member, sizeof(member), "%064x:ceil-%ld-%ld-%ld", 0,
		    (long)getpid(), id, n++);
		snprintf(name, sizeof(name), "rdceil:{%02x}:%s", b, member);
		snprintf(index, sizeof(index), "rdceil:{%02x}:i", b);
		r = redisCommand(c, "EVALSHA %s 2 %s %s %b %s %s %s %s %s",
		    sha_reserve, name, index, fp, (size_t)32, owner, "rid",
		    "30000", "86400000000", member);
		if (r == NULL)
			exit(1);
		freeReplyObject(r);
		r = redisCommand(c, "EVALSHA %s 2 %s %s %s %s %s %s %s %s %s",
		    sha_commit, name, index, owner, "201",
		    "Content-Type: application/json\r\n", "{\"id\":\"x\"}",
		    "86400000000", "0", member);
		if (r == NULL)
			exit(1);
		freeReplyObject(r);
		atomic_fetch_add(&pairs, 1);
	}
	redisFree(c);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t[256];
	redisContext *c;
	long i, n;

	if (argc == 3 && strcmp(argv[1], "--script") == 0) {
		fputs(idem_rds_lua[strcmp(argv[2], "commit") == 0 ? R_COMMIT :
		    R_RESERVE], stdout);
		return 0;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: rdceil PORT CONNECTIONS SECS\n");
		return 2;
	}
	port = atoi(argv[1]);
	n = atol(argv[2]);
	secs = atoi(argv[3]);
	if (n < 1 || n > 256 || secs < 1)
		return 2;
	if ((c = redisConnect("127.0.0.1", port)) == NULL || c->err != 0)
		return 1;
	load(c, R_RESERVE, sha_reserve);
	load(c, R_COMMIT, sha_commit);
	redisFree(c);
	for (i = 0; i < n; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("%.0f\n", (double)atomic_load(&pairs) / secs);
	return 0;
}
