/*
 * idem_secret.c - the key secret, read from its file (idem_secret.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idem_log.h"
#include "idem_secret.h"

/* Reads all of fd into s (at most IDEM_SECRET_MAX bytes; *over set when
 * there is more).  Returns 0, or -1 with errno. */
static int
read_all(int fd, idem_secret *s, int *over)
{
	char extra;
	ssize_t n;

	s->len = 0;
	*over = 0;
	while (s->len < IDEM_SECRET_MAX) {
		n = read(fd, s->bytes + s->len, IDEM_SECRET_MAX - s->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		s->len += (size_t)n;
	}
	while ((n = read(fd, &extra, 1)) < 0 && errno == EINTR)
		;
	if (n < 0)
		return -1;
	*over = n > 0;
	return 0;
}

idem_err
idem_secret_read(const char *path, idem_secret **out, char *why,
    size_t whysize)
{
	idem_secret *s;
	struct stat st;
	int fd, over = 0;

	*out = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(why, whysize, "cannot read %s: %s", path,
		    strerror(errno));
		return IDEM_ERR_IO;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, whysize, "%s is not a regular file", path);
		close(fd);
		return IDEM_ERR_CONFIG;
	}
	if (st.st_mode & (S_IROTH | S_IWOTH)) {
		snprintf(why, whysize, "%s is readable or writable by every "
		    "user; the secret must not be (chmod o-rwx %s)", path, path);
		close(fd);
		return IDEM_ERR_CONFIG;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		close(fd);
		snprintf(why, whysize, "out of memory");
		return IDEM_ERR_NOMEM;
	}
	if (read_all(fd, s, &over) < 0) {
		snprintf(why, whysize, "cannot read %s: %s", path,
		    strerror(errno));
		close(fd);
		idem_secret_free(s);
		return IDEM_ERR_IO;
	}
	close(fd);
	while (s->len > 0 && strchr(" \t\r\n", s->bytes[s->len - 1]) != NULL)
		s->len--;
	if (over || s->len < IDEM_SECRET_MIN) {
		snprintf(why, whysize, "%s holds %s%zu bytes; a key secret is %d "
		    "to %d bytes (make one with: head -c 32 /dev/urandom | "
		    "base64 > %s)", path, over ? "more than " : "", s->len,
		    IDEM_SECRET_MIN, IDEM_SECRET_MAX, path);
		idem_secret_free(s);
		return IDEM_ERR_CONFIG;
	}
	*out = s;
	return IDEM_OK;
}

idem_err
idem_password_read(const char *path, const char *env, const char *what,
    const char *file, char **out)
{
	const char *value = getenv(env);
	char line[1024];
	FILE *fp;

	*out = NULL;
	if (path == NULL) {
		if (value != NULL && (*out = strdup(value)) == NULL)
			return IDEM_ERR_NOMEM;
		return IDEM_OK;
	}
	if ((fp = fopen(path, "r")) == NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "%s: %s %s: %s", file, what, path,
		    strerror(errno));
		return IDEM_ERR_CONFIG;
	}
	if (fgets(line, sizeof(line), fp) == NULL)
		line[0] = '\0';
	fclose(fp);
	line[strcspn(line, "\r\n")] = '\0';
	*out = strdup(line);
	explicit_bzero(line, sizeof(line));
	return *out != NULL ? IDEM_OK : IDEM_ERR_NOMEM;
}

void
idem_secret_free(idem_secret *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, sizeof(*s));
	free(s);
}
