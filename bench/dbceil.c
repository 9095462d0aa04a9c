/*
 * dbceil.c - the database ceiling: THREADS connections issuing, as fast as
 * they can for SECONDS, exactly the statements idemfcgi's MySQL store sends
 * for a first execution (INSERT IGNORE, then the owner-checked UPDATE), on
 * fresh keys.  Prints "operations/s".
 *
 *   dbceil SOCKET USER PASSWORD DATABASE THREADS SECONDS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

static const char *sock, *user, *pass, *db;
static volatile int stop;

static const char insert_sql[] = "INSERT IGNORE INTO idempotency_keys "
    "(scope_hash, idem_key, fingerprint, state, owner, request_id, "
    "reserved_at, lease_at, lease_ms, expires_at) VALUES (?, ?, ?, "
    "'in_flight', ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 30000, "
    "UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)";
static const char commit_sql[] = "UPDATE idempotency_keys SET state = "
    "'committed', status = ?, headers = ?, body = ?, expires_at = "
    "UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE scope_hash = ? AND "
    "idem_key = ? AND state = 'in_flight' AND owner = ?";

typedef struct worker {
	int id;
	unsigned long ops;
} worker;

static void
bind_blob(MYSQL_BIND *b, const void *p, unsigned long *len, size_t n)
{
	memset(b, 0, sizeof(*b));
	*len = (unsigned long)n;
	b->buffer_type = MYSQL_TYPE_BLOB;
	b->buffer = (void *)p;
	b->buffer_length = *len;
	b->length = len;
}

static void
bind_ll(MYSQL_BIND *b, long long *v)
{
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_LONGLONG;
	b->buffer = v;
}

static void *
run(void *arg)
{
	worker *w = arg;
	MYSQL *m = mysql_init(NULL);
	MYSQL_STMT *ins, *com;
	unsigned char scope[32] = { 0 }, fp[32] = { 1 };
	char key[64], owner[64], rid[] = "bench";
	const char *hdr = "Content-Type: application/json\r\n", *body =
	    "{\"exec\":\"00000000-0000-0000-0000-000000000000\"}";
	unsigned long len[8];
	long long life = 86400000000LL, status = 201;
	MYSQL_BIND b[8];

	if (mysql_real_connect(m, NULL, user, pass, db, 0, sock,
	    CLIENT_FOUND_ROWS) == NULL) {
		fprintf(stderr, "dbceil: %s\n", mysql_error(m));
		exit(1);
	}
	ins = mysql_stmt_init(m);
	com = mysql_stmt_init(m);
	if (mysql_stmt_prepare(ins, insert_sql, strlen(insert_sql)) != 0 ||
	    mysql_stmt_prepare(com, commit_sql, strlen(commit_sql)) != 0) {
		fprintf(stderr, "dbceil: %s\n", mysql_error(m));
		exit(1);
	}
	snprintf(owner, sizeof(owner), "bench%d.0123456789abcdef", w->id);
	while (!stop) {
		size_t kl = (size_t)snprintf(key, sizeof(key), "ceil-%ld-%d-%lu",
		    (long)time(NULL), w->id, w->ops);
		bind_blob(&b[0], scope, &len[0], 32);
		bind_blob(&b[1], key, &len[1], kl);
		bind_blob(&b[2], fp, &len[2], 32);
		bind_blob(&b[3], owner, &len[3], strlen(owner));
		bind_blob(&b[4], rid, &len[4], strlen(rid));
		bind_ll(&b[5], &life);
		if (mysql_stmt_bind_param(ins, b) != 0 ||
		    mysql_stmt_execute(ins) != 0)
			break;
		bind_ll(&b[0], &status);
		bind_blob(&b[1], hdr, &len[0], strlen(hdr));
		bind_blob(&b[2], body, &len[1], strlen(body));
		bind_ll(&b[3], &life);
		bind_blob(&b[4], scope, &len[2], 32);
		bind_blob(&b[5], key, &len[3], kl);
		bind_blob(&b[6], owner, &len[4], strlen(owner));
		if (mysql_stmt_bind_param(com, b) != 0 ||
		    mysql_stmt_execute(com) != 0)
			break;
		w->ops++;
	}
	mysql_stmt_close(ins);
	mysql_stmt_close(com);
	mysql_close(m);
	return NULL;
}

int
main(int argc, char **argv)
{
	pthread_t t[256];
	worker w[256];
	unsigned long total = 0;
	int n, secs, i;

	if (argc != 7) {
		fprintf(stderr, "usage: dbceil SOCKET USER PASSWORD DATABASE "
		    "THREADS SECONDS\n");
		return 2;
	}
	sock = argv[1];
	user = argv[2];
	pass = argv[3];
	db = argv[4];
	n = atoi(argv[5]);
	secs = atoi(argv[6]);
	if (n < 1 || n > 256 || secs < 1)
		return 2;
	mysql_library_init(0, NULL, NULL);
	for (i = 0; i < n; i++) {
		w[i].id = i;
		w[i].ops = 0;
		pthread_create(&t[i], NULL, run, &w[i]);
	}
	sleep((unsigned)secs);
	stop = 1;
	for (i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		total += w[i].ops;
	}
	printf("%.0f\n", (double)total / secs);
	return 0;
}
