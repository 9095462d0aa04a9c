/*
 * idem_downstream.c - the key secret and downstream keys (see
 * idem_downstream.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/hmac.h>

#include "idem_downstream.h"
#include "idem_request.h"

/* What separates downstream keys from every other use of the secret. */
static const char label[] = "idemfcgi downstream v1";

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

void
idem_secret_free(idem_secret *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, sizeof(*s));
	free(s);
}

void
idem_downstream_base(const idem_secret *secret, const unsigned char scope[32],
    const unsigned char fp[32], const char *key, size_t len,
    unsigned char out[32])
{
	unsigned char msg[sizeof(label) + 64 + 1 + 255];
	unsigned int outlen = 32;

	if (len > 255)
		len = 255;
	memcpy(msg, label, sizeof(label));      /* with its NUL */
	memcpy(msg + sizeof(label), scope, 32);
	memcpy(msg + sizeof(label) + 32, fp, 32);
	msg[sizeof(label) + 64] = (unsigned char)len;
	memcpy(msg + sizeof(label) + 65, key, len);
	if (HMAC(EVP_sha256(), secret->bytes, (int)secret->len, msg,
	    sizeof(label) + 65 + len, out, &outlen) == NULL)
		/* cannot happen with SHA-256; never a guessable key */
		abort();
}

void
idem_downstream_key(const unsigned char base[32], const char *purpose,
    size_t plen, char out[IDEM_DOWNSTREAM_KEY_SIZE])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char d[32];
	unsigned int dlen = 32;
	size_t i, o = 0;

	if (HMAC(EVP_sha256(), base, 32, (const unsigned char *)purpose, plen,
	    d, &dlen) == NULL)
		abort();
	d[6] = (unsigned char)((d[6] & 0x0f) | 0x80);   /* version 8 */
	d[8] = (unsigned char)((d[8] & 0x3f) | 0x80);   /* variant 10 */
	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[d[i] >> 4];
		out[o++] = hex[d[i] & 15];
	}
	out[o] = '\0';
}

idem_err
idem_request_downstream_key(const idem_request *req, const char *purpose,
    char out[IDEM_DOWNSTREAM_KEY_SIZE])
{
	size_t plen;

	if (req == NULL || purpose == NULL || out == NULL)
		return IDEM_ERR_INVALID;
	plen = strlen(purpose);
	if (plen == 0 || plen > IDEM_PURPOSE_MAX)
		return IDEM_ERR_INVALID;
	if (req->key_hash[0] == '\0')
		return IDEM_ERR_NOT_FOUND;
	if (!req->has_downstream)
		return IDEM_ERR_CONFIG;
	idem_downstream_key(req->downstream, purpose, plen, out);
	return IDEM_OK;
}
