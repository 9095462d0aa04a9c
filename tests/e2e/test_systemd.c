/*
 * test_systemd.c - idemfcgi under systemd's protocols, spoken for real:
 * a datagram socket as $NOTIFY_SOCKET (READY=1, RELOADING=1, STOPPING=1,
 * WATCHDOG=1), a listening socket inherited as fd 3 with $LISTEN_FDS and
 * $LISTEN_PID (socket activation), and stderr named by $JOURNAL_STREAM.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "calls.h"
#include "harness.h"
#include "notify.h"

#ifndef HAVE_SYSTEMD
#define NEED_SYSTEMD() cr_skip_test("built without libsystemd")
#else
#define NEED_SYSTEMD() ((void)0)
#endif

Test(systemd, notify_ready_reloading_stopping)
{
	notify_sock n;
	const char *env[2];
	harness h;
	call c;
	int before = 0;

	NEED_SYSTEMD();
	cr_assert_eq(notify_open(&n), 0);
	env[0] = n.env;
	env[1] = NULL;
	cr_assert_eq(harness_start(&h, &(harness_opts){ .env = env }), 0);
	/* harness_start returned once the socket accepted */
	cr_expect(notify_await(&n, "READY=1", NULL, NULL), "no READY=1");
	c = call_one(h.addr, "/testkit/echo", "n-1", NULL);
	cr_expect_eq(c.status, 201);

	kill(h.pid, SIGHUP);
	cr_expect(notify_await(&n, "RELOADING=1", "READY=1", &before),
	    "no RELOADING=1 at SIGHUP");
	cr_expect_eq(before, 0, "READY=1 again before RELOADING=1");
	cr_expect(notify_await(&n, "READY=1", NULL, NULL),
	    "no READY=1 after the reload");
	cr_expect(harness_await_log(&h, "reloaded:"));
	c = call_one(h.addr, "/testkit/echo", "n-2", NULL);
	cr_expect_eq(c.status, 201);

	cr_expect_eq(harness_stop(&h), 0);
	/* the datagrams outlive the sender on our socket */
	cr_expect(notify_await(&n, "STOPPING=1", NULL, NULL),
	    "no STOPPING=1 at SIGTERM");
	notify_close(&n);
}

Test(systemd, watchdog_pings_while_workers_run)
{
	notify_sock n;
	const char *env[3];
	char buf[1024];
	harness h;
	int pids[4], pings = 0, i;

	NEED_SYSTEMD();
	cr_assert_eq(notify_open(&n), 0);
	env[0] = n.env;
	env[1] = "WATCHDOG_USEC=200000";
	env[2] = NULL;
	cr_assert_eq(harness_start(&h, &(harness_opts){ .env = env }), 0);
	cr_assert(notify_await(&n, "READY=1", NULL, NULL));
	for (i = 0; i < 3; i++)
		cr_assert(notify_await(&n, "WATCHDOG=1", NULL, NULL),
		    "ping %d did not come", i + 1);

	/* a stopped worker: no ping until it runs again */
	cr_assert_eq(harness_workers(&h, pids, 4), 1);
	kill(pids[0], SIGSTOP);
	cr_assert(notify_await(&n, "STATUS=watchdog: worker", NULL, NULL),
	    "the master did not see the worker stopped");
	cr_expect(harness_await_log(&h, "is stopped; no ping"));
	/* five periods of silence: a ping here would be a bug (a slow
	 * machine can only hide one, never make one up) */
	while (notify_next(&n, buf, sizeof(buf), 500) >= 0)
		pings += notify_has_line(buf, "WATCHDOG=1");
	cr_expect_eq(pings, 0, "%d ping(s) with the worker stopped", pings);
	kill(pids[0], SIGCONT);
	pings = 0;
	cr_expect(notify_await(&n, "STATUS=watchdog: pinging", "WATCHDOG=1",
	    &pings), "the pings did not come back");
	cr_expect_eq(pings, 0);
	cr_expect(notify_await(&n, "WATCHDOG=1", NULL, NULL));
	cr_expect_eq(harness_stop(&h), 0);
	notify_close(&n);
}

/* A listening unix socket at dir/name, as systemd's socket unit makes
 * it; its address into addr. */
static int
listen_at(const char *dir, char *addr, size_t size)
{
	struct sockaddr_un sa;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.64s/activated.sock", dir);
	snprintf(addr, size, "unix:%s", sa.sun_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 64), 0);
	return fd;
}

Test(systemd, socket_activation)
{
	char dir[] = "/tmp/idemfcgi-activated.XXXXXX", addr[160], path[300];
	harness h;
	call c;
	int fd;

	NEED_SYSTEMD();
	cr_assert_not_null(mkdtemp(dir));
	fd = listen_at(dir, addr, sizeof(addr));
	cr_assert_eq(harness_start(&h, &(harness_opts){ .listen_fd = fd,
	    .connect = addr }), 0);
	cr_expect(harness_await_log(&h, "listening on the socket systemd "
	    "passed (fd 3); listen = unix:"));
	/* the configured socket was not made: the inherited one wins */
	snprintf(path, sizeof(path), "%s/fcgi.sock", h.dir);
	cr_expect_neq(access(path, F_OK), 0);
	c = call_one(h.addr, "/testkit/echo", "a-1", NULL);
	cr_expect_eq(c.status, 201);
	c = call_one(h.addr, "/testkit/echo", "a-1", NULL);
	cr_expect_str_eq(c.replayed, "true");

	/* a reload keeps the socket */
	kill(h.pid, SIGHUP);
	cr_expect(harness_await_log(&h, "reloaded:"));
	c = call_one(h.addr, "/testkit/echo", "a-2", NULL);
	cr_expect_eq(c.status, 201);
	cr_expect_eq(harness_count_key(&h, "/testkit/echo", "a-1"), 1);
	cr_expect_eq(harness_stop(&h), 0);

	/* the socket outlives the daemon: its file stays, and the next
	 * one serves it */
	cr_expect_eq(access(addr + 5, F_OK), 0, "the socket was unlinked");
	cr_assert_eq(harness_start(&h, &(harness_opts){ .listen_fd = fd,
	    .connect = addr }), 0);
	c = call_one(h.addr, "/testkit/echo", "a-3", NULL);
	cr_expect_eq(c.status, 201);
	cr_expect_eq(harness_stop(&h), 0);
	close(fd);
	unlink(addr + 5);
	rmdir(dir);
}

/* What systemd might pass that idemfcgi cannot serve is refused, with
 * a message: a datagram socket (ListenDatagram=). */
Test(systemd, socket_activation_refuses_a_datagram_socket)
{
	char addr[] = "unix:/nonexistent/idemfcgi.sock";
	harness h;
	char *log;
	int fd;

	NEED_SYSTEMD();
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	cr_expect_neq(harness_start(&h, &(harness_opts){ .listen_fd = fd,
	    .connect = addr }), 0, "served a datagram socket");
	log = harness_log(&h);
	cr_expect(log != NULL && strstr(log, "fd 3 is not a listening stream "
	    "socket") != NULL, "%s", log);
	free(log);
	harness_stop(&h);
	close(fd);
}

/* Whether every line of log starts with "<N>" and holds no timestamp. */
static void
expect_journal_lines(const char *log)
{
	const char *p = log;
	int lines = 0;

	while (*p != '\0') {
		const char *end = strchr(p, '\n');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		cr_expect(len > 3 && p[0] == '<' && p[1] >= '0' && p[1] <= '7' &&
		    p[2] == '>' && strncmp(p + 3, "idemfcgi[", 9) == 0,
		    "not a journal line: %.*s", (int)len, p);
		cr_expect(len < 7 || strncmp(p + 3, "20", 2) != 0,
		    "a timestamp: %.*s", (int)len, p);
		lines++;
		p += len + (end != NULL);
	}
	cr_expect(lines > 0);
}

Test(systemd, journal_stream_priorities)
{
	harness h;
	char *log, bad[400];
	FILE *fp;

	cr_assert_eq(harness_start(&h, &(harness_opts){ .journal = 1 }), 0);
	cr_assert(harness_await_log(&h, "master "));
	/* an error: a reload of a config with a bad key */
	snprintf(bad, sizeof(bad), "%s", h.conf);
	fp = fopen(bad, "a");
	cr_assert_not_null(fp);
	fputs("[server]\nno-such-key = 1\n", fp);
	fclose(fp);
	kill(h.pid, SIGHUP);
	cr_assert(harness_await_log(&h, "not reloaded"));
	log = harness_log(&h);
	cr_assert_not_null(log);
	expect_journal_lines(log);
	cr_expect(strstr(log, "<6>idemfcgi[") != NULL, "no info line: %s", log);
	cr_expect(strstr(log, "<3>idemfcgi[") != NULL, "no error line: %s", log);
	free(log);
	cr_expect_eq(harness_stop(&h), 0);

	/* not the journal: lines as before, with their time */
	cr_assert_eq(harness_start(&h, NULL), 0);
	cr_assert(harness_await_log(&h, "master "));
	log = harness_log(&h);
	cr_assert_not_null(log);
	cr_expect_eq(strncmp(log, "20", 2), 0, "%s", log);
	cr_expect_null(strstr(log, "<6>"));
	free(log);
	cr_expect_eq(harness_stop(&h), 0);
}
