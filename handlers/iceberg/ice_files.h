/*
 * ice_files.h - the catalog's warehouse: a directory under which every
 * table's location lies, and where table metadata is written as Iceberg
 * writes it (<location>/metadata/NNNNN-<uuid>.metadata.json) before a
 * commit points the table at it.  Locations are file:// URIs of absolute
 * paths inside the warehouse; nothing outside it is ever read, written or
 * deleted.  Strings out are new (caller frees).
 */
#ifndef ICE_FILES_H
#define ICE_FILES_H

#include <jansson.h>

#include "idemfcgi.h"

/* The largest metadata file read back (register-table). */
#define ICE_META_FILE_MAX (64u << 20)

/* The warehouse at dir (an absolute path; made by ice_wh_make).  Returns
 * it (free with ice_wh_free) or NULL (logged). */
typedef struct ice_wh ice_wh;
ice_wh *ice_wh_new(const char *dir);
void ice_wh_free(ice_wh *wh);
/* The warehouse's directory (borrowed). */
const char *ice_wh_root(const ice_wh *wh);
/* Makes the warehouse's directory (and its parents).  Returns IDEM_OK or
 * IDEM_ERR_IO (logged). */
idem_err ice_wh_make(const ice_wh *wh);

/* A new table's location: file://<warehouse>/<prefix>/<part>/.../<name>-
 * <uuid without dashes>, each name percent-encoded but for letters,
 * digits, '_' and '-'.  NULL when out of memory. */
char *ice_wh_location(const ice_wh *wh, const char *prefix, const char *ns,
    const char *name, const char *uuid);
/* The absolute path of uri (a file:// URI or an absolute path), when it is
 * inside the warehouse and has no "." or ".." segment; else NULL. */
char *ice_wh_path(const ice_wh *wh, const char *uri);

/*
 * Writes meta as <location>/metadata/<version as %05d>-<random uuid>
 * .metadata.json, durably (fsync of the file and its directory), a file
 * of its own (O_EXCL).  Returns IDEM_OK with *uri its file:// URI;
 * IDEM_ERR_INVALID (location not inside the warehouse, or no file can be
 * made there: a path through a file, a name too long); IDEM_ERR_IO
 * (logged); IDEM_ERR_NOMEM.
 */
idem_err ice_wh_write(const ice_wh *wh, const char *location, long version,
    const json_t *meta, char **uri);
/* The version of the metadata file at uri (its NNNNN- name), or -1. */
long ice_wh_version(const char *uri);

/* Reads and parses the metadata file at uri (inside the warehouse, at
 * most ICE_META_FILE_MAX bytes).  Returns IDEM_OK with *meta (a new
 * reference); IDEM_ERR_INVALID (outside the warehouse, not JSON, an
 * object not); IDEM_ERR_NOT_FOUND; IDEM_ERR_TOO_LARGE; IDEM_ERR_IO. */
idem_err ice_wh_read(const ice_wh *wh, const char *uri, json_t **meta);

/* Deletes what a dropped table with purgeRequested left at location: the
 * whole directory when the catalog named it (its last segment ends with
 * the table's uuid), else its metadata directory's *.metadata.json files.
 * Returns IDEM_OK (also when nothing was there) or IDEM_ERR_IO (logged). */
idem_err ice_wh_purge(const ice_wh *wh, const char *location);

#endif /* ICE_FILES_H */
