/*
 * http.c - running curl: the body goes in on a pipe, the response comes
 * back with its head (-i) on another.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "http.h"

/* Writes all of buf to fd, ignoring a reader that went away. */
static void
feed(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* Splits curl -i output: skips interim 1xx heads, keeps the last one. */
static void
parse(http_response *r, char *all, size_t len)
{
	char *p = all, *sep;

	for (;;) {
		sep = strstr(p, "\r\n\r\n");
		if (sep == NULL || strncmp(p, "HTTP/", 5) != 0)
			break;
		r->status = atoi(strchr(p, ' ') != NULL ? strchr(p, ' ') + 1 : "0");
		if (r->status >= 200)
			break;
		p = sep + 4;
	}
	if (sep == NULL) {
		r->head = strdup(p);
		r->body = strdup("");
		return;
	}
	r->head = strndup(p, (size_t)(sep - p) + 2);
	r->body_len = len - (size_t)(sep + 4 - all);
	r->body = malloc(r->body_len + 1);
	memcpy(r->body, sep + 4, r->body_len);
	r->body[r->body_len] = '\0';
}

int
http_request(const char *method, const char *url, const char *const *headers,
    const char *body, size_t len, http_response *out)
{
	const char *argv[64];
	int in[2], outp[2], n = 0, status, i;
	char *all = NULL;
	size_t alen = 0, cap = 0;
	pid_t pid;
	void (*old)(int);

	memset(out, 0, sizeof(*out));
	out->status = -1;
	argv[n++] = "curl";
	argv[n++] = "-s";
	argv[n++] = "-i";
	argv[n++] = "--max-time";
	argv[n++] = "30";
	argv[n++] = "-X";
	argv[n++] = method;
	argv[n++] = "-H";
	argv[n++] = "Expect:";
	for (i = 0; headers != NULL && headers[i] != NULL && n < 56; i++) {
		argv[n++] = "-H";
		argv[n++] = headers[i];
	}
	if (body != NULL) {
		argv[n++] = "--data-binary";
		argv[n++] = "@-";
	}
	argv[n++] = url;
	argv[n] = NULL;
	/* close-on-exec: a curl forked by another thread must not hold our
	 * pipe ends open */
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0)
		return -1;
	if ((pid = fork()) == 0) {
		dup2(in[0], 0);
		dup2(outp[1], 1);
		close(in[1]);
		close(outp[0]);
		execvp("curl", (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(outp[1]);
	old = signal(SIGPIPE, SIG_IGN);
	if (body != NULL)
		feed(in[1], body, len);
	close(in[1]);
	signal(SIGPIPE, old);
	for (;;) {
		ssize_t r;
		if (alen + 65536 + 1 > cap) {
			cap = cap ? cap * 2 : 131072;
			all = realloc(all, cap);
		}
		r = read(outp[0], all + alen, 65536);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		alen += (size_t)r;
	}
	close(outp[0]);
	waitpid(pid, &status, 0);
	if (all == NULL || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		free(all);
		return WIFEXITED(status) && WEXITSTATUS(status) == 127 ? -1 : 0;
	}
	all[alen] = '\0';
	parse(out, all, alen);
	free(all);
	return 0;
}

const char *
http_header(const http_response *r, const char *name)
{
	return harness_head_find(r->head, name);
}

void
http_response_free(http_response *r)
{
	free(r->head);
	free(r->body);
	memset(r, 0, sizeof(*r));
}
