/*
 * ice_files.c - the warehouse directory and the metadata files in it
 * (ice_files.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uuid/uuid.h>

#include "ice_cat.h"
#include "ice_files.h"

struct ice_wh {
	char *dir;      /* absolute, no trailing '/' */
};

ice_wh *
ice_wh_new(const char *dir)
{
	ice_wh *wh;
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (dir[0] != '/' || n < 2 || strstr(dir, "/../") != NULL ||
	    strstr(dir, "/./") != NULL) {
		idem_log(NULL, IDEM_LOG_ERROR, "[iceberg] warehouse = %s: an "
		    "absolute path of a directory", dir);
		return NULL;
	}
	if ((wh = calloc(1, sizeof(*wh))) == NULL ||
	    (wh->dir = strndup(dir, n)) == NULL) {
		free(wh);
		return NULL;
	}
	return wh;
}

const char *
ice_wh_root(const ice_wh *wh)
{
	return wh->dir;
}

/* Whether errno says the location cannot hold a file, whatever is
 * tried again. */
static int
bad_place(int e)
{
	return e == ENOTDIR || e == ENAMETOOLONG || e == EISDIR || e == ELOOP ||
	    e == EEXIST;
}

void
ice_wh_free(ice_wh *wh)
{
	if (wh == NULL)
		return;
	free(wh->dir);
	free(wh);
}

static int sync_dir(const char *dir);

/* mkdir path, then fsync of its parent when it was made, so that the
 * entry survives a crash.  Returns 0 or -1 (errno). */
static int
make_one(char *path)
{
	char *slash;
	int rc;

	if (mkdir(path, 0755) != 0)
		return errno == EEXIST ? 0 : -1;
	if ((slash = strrchr(path, '/')) == NULL || slash == path)
		return 0;
	*slash = '\0';
	rc = sync_dir(path);
	*slash = '/';
	return rc;
}

/* mkdir -p path (modifiable in place).  Returns 0 or -1 (errno). */
static int
mkdirs(char *path)
{
	char *p;

	for (p = path + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (make_one(path) != 0) {
			*p = '/';
			return -1;
		}
		*p = '/';
	}
	return make_one(path);
}

idem_err
ice_wh_make(const ice_wh *wh)
{
	char *copy = strdup(wh->dir);
	int rc = copy != NULL ? mkdirs(copy) : -1;

	free(copy);
	if (rc == 0)
		return IDEM_OK;
	idem_log(NULL, IDEM_LOG_ERROR, "[iceberg] warehouse %s: cannot make "
	    "it: %s", wh->dir, strerror(errno));
	return IDEM_ERR_IO;
}

/* Appends name to buf at *n (room checked by the caller), percent-
 * encoded but for letters, digits, '_' and '-'. */
static void
encode(char *buf, size_t *n, const char *name, size_t len)
{
	static const char hexd[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '_' || c == '-') {
			buf[(*n)++] = (char)c;
		} else {
			buf[(*n)++] = '%';
			buf[(*n)++] = hexd[c >> 4];
			buf[(*n)++] = hexd[c & 15];
		}
	}
}

char *
ice_wh_location(const ice_wh *wh, const char *prefix, const char *ns,
    const char *name, const char *uuid)
{
	size_t size = strlen("file://") + strlen(wh->dir) + 3 *
	    (strlen(prefix) + strlen(ns) + strlen(name)) + strlen(uuid) + 16;
	char *loc = malloc(size);
	const char *p = ns, *end;
	size_t n, i;

	if (loc == NULL)
		return NULL;
	n = (size_t)sprintf(loc, "file://%s/", wh->dir);
	if (*prefix != '\0')
		encode(loc, &n, prefix, strlen(prefix));
	else
		loc[n++] = '_';
	for (;;) {
		end = strchr(p, ICE_SEP);
		loc[n++] = '/';
		encode(loc, &n, p, end != NULL ? (size_t)(end - p) : strlen(p));
		if (end == NULL)
			break;
		p = end + 1;
	}
	loc[n++] = '/';
	encode(loc, &n, name, strlen(name));
	loc[n++] = '-';
	for (i = 0; uuid[i] != '\0'; i++)
		if (uuid[i] != '-')
			loc[n++] = uuid[i];
	loc[n] = '\0';
	return loc;
}

char *
ice_wh_path(const ice_wh *wh, const char *uri)
{
	const char *path = uri;
	size_t dl = strlen(wh->dir);

	if (strncmp(uri, "file://", 7) == 0)
		path = uri + 7;
	else if (strncmp(uri, "file:/", 6) == 0)
		path = uri + 5;
	if (strncmp(path, wh->dir, dl) != 0 || path[dl] != '/' ||
	    path[dl + 1] == '\0' || strstr(path, "/./") != NULL ||
	    strstr(path, "/../") != NULL || strstr(path, "//") != NULL ||
	    (strlen(path) >= 2 && strcmp(path + strlen(path) - 2, "/.") == 0) ||
	    (strlen(path) >= 3 && strcmp(path + strlen(path) - 3, "/..") == 0))
		return NULL;
	return strdup(path);
}

/* fsyncs directory dir.  Returns 0 or -1. */
static int
sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	int rc = fd >= 0 ? fsync(fd) : -1;

	if (fd >= 0)
		close(fd);
	return rc;
}

/* Writes len bytes of text to a new file at path, durably.  Returns 0 or
 * -1 (errno). */
static int
write_new(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	size_t done = 0;

	if (fd < 0)
		return -1;
	while (done < len) {
		ssize_t w = write(fd, text + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			unlink(path);
			return -1;
		}
		done += (size_t)w;
	}
	if (fsync(fd) != 0) {
		close(fd);
		unlink(path);
		return -1;
	}
	return close(fd);
}

idem_err
ice_wh_write(const ice_wh *wh, const char *location, long version,
    const json_t *meta, char **uri)
{
	char *dir = ice_wh_path(wh, location), *path = NULL, *text = NULL,
	    *mdir = NULL;
	char id[37];
	uuid_t u;
	idem_err err = IDEM_ERR_NOMEM;

	*uri = NULL;
	if (dir == NULL)
		return IDEM_ERR_INVALID;
	uuid_generate_random(u);
	uuid_unparse_lower(u, id);
	if (asprintf(&mdir, "%s/metadata", dir) < 0) {
		mdir = NULL;
		goto out;
	}
	if (mkdirs(mdir) != 0) {
		err = bad_place(errno) ? IDEM_ERR_INVALID : IDEM_ERR_IO;
		if (err == IDEM_ERR_IO)
			idem_log(NULL, IDEM_LOG_ERROR, "iceberg: cannot make "
			    "%s: %s", mdir, strerror(errno));
		goto out;
	}
	if (asprintf(&path, "%s/%05ld-%s.metadata.json", mdir, version,
	    id) < 0) {
		path = NULL;
		goto out;
	}
	if ((text = json_dumps(meta, JSON_COMPACT)) == NULL)
		goto out;
	if (write_new(path, text, strlen(text)) != 0 || sync_dir(mdir) != 0) {
		err = bad_place(errno) ? IDEM_ERR_INVALID : IDEM_ERR_IO;
		if (err == IDEM_ERR_IO)
			idem_log(NULL, IDEM_LOG_ERROR, "iceberg: cannot write "
			    "%s: %s", path, strerror(errno));
		goto out;
	}
	if (asprintf(uri, "file://%s", path) < 0)
		*uri = NULL;
	else
		err = IDEM_OK;
out:
	free(dir);
	free(mdir);
	free(path);
	free(text);
	return err;
}

long
ice_wh_version(const char *uri)
{
	const char *base = strrchr(uri, '/');
	char *end;
	long v;

	base = base != NULL ? base + 1 : uri;
	v = strtol(base, &end, 10);
	return end != base && *end == '-' && v >= 0 ? v : -1;
}

idem_err
ice_wh_read(const ice_wh *wh, const char *uri, json_t **meta)
{
	char *path = ice_wh_path(wh, uri), *text = NULL;
	struct stat st;
	json_error_t jerr;
	size_t done = 0;
	int fd;
	idem_err err = IDEM_ERR_IO;

	*meta = NULL;
	if (path == NULL)
		return IDEM_ERR_INVALID;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		err = errno == ENOENT ? IDEM_ERR_NOT_FOUND : IDEM_ERR_IO;
		free(path);
		return err;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		goto out;
	if ((size_t)st.st_size > ICE_META_FILE_MAX) {
		err = IDEM_ERR_TOO_LARGE;
		goto out;
	}
	if ((text = malloc((size_t)st.st_size + 1)) == NULL) {
		err = IDEM_ERR_NOMEM;
		goto out;
	}
	while (done < (size_t)st.st_size) {
		ssize_t r = read(fd, text + done, (size_t)st.st_size - done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto out;
		done += (size_t)r;
	}
	*meta = json_loadb(text, done, JSON_REJECT_DUPLICATES, &jerr);
	err = json_is_object(*meta) ? IDEM_OK : IDEM_ERR_INVALID;
	if (err != IDEM_OK) {
		json_decref(*meta);
		*meta = NULL;
	}
out:
	close(fd);
	free(path);
	free(text);
	return err;
}

/* Removes one entry of a tree walk (nftw). */
static int
remove_entry(const char *path, const struct stat *st, int flag,
    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

/* Whether the last segment of path ends with "-" and 32 hex digits (a
 * location the catalog named). */
static int
catalog_named(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n, i;

	base = base != NULL ? base + 1 : path;
	n = strlen(base);
	if (n < 34 || base[n - 33] != '-')
		return 0;
	for (i = n - 32; i < n; i++)
		if (!((base[i] >= '0' && base[i] <= '9') ||
		    (base[i] >= 'a' && base[i] <= 'f')))
			return 0;
	return 1;
}

idem_err
ice_wh_purge(const ice_wh *wh, const char *location)
{
	char *path = ice_wh_path(wh, location), *meta = NULL, *file = NULL;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (path == NULL)
		return IDEM_OK;   /* never outside the warehouse */
	if (catalog_named(path)) {
		rc = nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
		if (rc != 0 && errno == ENOENT)
			rc = 0;
	} else if (asprintf(&meta, "%s/metadata", path) >= 0 &&
	    (d = opendir(meta)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			size_t n = strlen(de->d_name);
			if (n < 14 || strcmp(de->d_name + n - 14,
			    ".metadata.json") != 0)
				continue;
			if (asprintf(&file, "%s/%s", meta, de->d_name) < 0)
				break;
			if (unlink(file) != 0 && errno != ENOENT)
				rc = -1;
			free(file);
		}
		closedir(d);
	}
	if (rc != 0)
		idem_log(NULL, IDEM_LOG_ERROR, "iceberg: purge of %s: %s", path,
		    strerror(errno));
	free(meta);
	free(path);
	return rc == 0 ? IDEM_OK : IDEM_ERR_IO;
}
