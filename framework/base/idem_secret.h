/*
 * idem_secret.h - a deployment's key secret ([idempotency]
 * key-secret-file), read from its file when the config is: what
 * downstream keys are derived with (idem_downstream.h).
 */
#ifndef IDEM_SECRET_H
#define IDEM_SECRET_H

#include <stddef.h>

#include "idemfcgi.h"

#define IDEM_SECRET_MIN 32        /* bytes a key secret holds at least */
#define IDEM_SECRET_MAX 4096      /* and at most */

/* A deployment's key secret: owned by the config that read it. */
typedef struct idem_secret {
	size_t len;
	unsigned char bytes[IDEM_SECRET_MAX];
} idem_secret;

/*
 * Reads the secret in the file at path: its bytes without trailing
 * white space, IDEM_SECRET_MIN to IDEM_SECRET_MAX of them, from a regular
 * file that other users cannot read.  Returns IDEM_OK with *out (free
 * with idem_secret_free), or an error with why (whysize bytes) saying
 * what is wrong: IDEM_ERR_IO, IDEM_ERR_CONFIG or IDEM_ERR_NOMEM.
 */
idem_err idem_secret_read(const char *path, idem_secret **out, char *why,
    size_t whysize);

/* Wipes and frees s; NULL is fine. */
void idem_secret_free(idem_secret *s);

/*
 * A database's password: the first line of the file at path (its line
 * end cut), or with path NULL the environment variable env, or none
 * (*out NULL: the client library's own).  A file that cannot be read is
 * logged with what names it ("[mysql] password-file") and the config
 * file.  Returns IDEM_OK with *out (caller wipes and frees),
 * IDEM_ERR_CONFIG or IDEM_ERR_NOMEM.
 */
idem_err idem_password_read(const char *path, const char *env,
    const char *what, const char *file, char **out);

#endif
