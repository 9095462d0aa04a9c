/*
 * notify.c - a datagram socket as $NOTIFY_SOCKET, read as systemd would.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"

int
notify_open(notify_sock *n)
{
	struct sockaddr_un sa;

	memset(n, 0, sizeof(*n));
	n->fd = -1;
	snprintf(n->dir, sizeof(n->dir), "/tmp/idemfcgi-notify.XXXXXX");
	if (mkdtemp(n->dir) == NULL)
		return -1;
	snprintf(n->path, sizeof(n->path), "%.40s/notify", n->dir);
	snprintf(n->env, sizeof(n->env), "NOTIFY_SOCKET=%.64s", n->path);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.64s", n->path);
	if ((n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(n->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		notify_close(n);
		return -1;
	}
	return 0;
}

void
notify_close(notify_sock *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
	unlink(n->path);
	rmdir(n->dir);
}

ssize_t
notify_next(notify_sock *n, char *buf, size_t size, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	ssize_t len;

	setsockopt(n->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	do
		len = recv(n->fd, buf, size - 1, 0);
	while (len < 0 && errno == EINTR);
	if (len < 0)
		return -1;
	buf[len] = '\0';
	return len;
}

int
notify_has_line(const char *msg, const char *want)
{
	size_t len = strlen(want);
	const char *p = msg;

	while ((p = strstr(p, want)) != NULL) {
		if (p == msg || p[-1] == '\n')
			return 1;
		p += len;
	}
	return 0;
}

int
notify_await(notify_sock *n, const char *want, const char *other,
    int *skipped)
{
	char buf[1024];

	while (notify_next(n, buf, sizeof(buf), NOTIFY_EVENT_MS) >= 0) {
		if (notify_has_line(buf, want))
			return 1;
		if (skipped != NULL && other != NULL &&
		    notify_has_line(buf, other))
			(*skipped)++;
	}
	return 0;
}
