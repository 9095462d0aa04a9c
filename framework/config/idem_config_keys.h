/*
 * idem_config_keys.h - the keys of the core sections, for the INI driver
 * (idem_config.c); not installed.
 *
 * One table in idem_config_keys.c has a row per key of [server],
 * [idempotency], [metrics] and [mysql]: its section and name, where its
 * value goes in idem_config, how the value is parsed and checked (its
 * type, range or names) and its default, as text that the same code
 * parses.  The core sections are the sections of the table.  Adding a key
 * is one row there, its field in idem_config and its docs (DESIGN.md
 * section 3, idemfcgi.conf(5)).
 */
#ifndef IDEM_CONFIG_KEYS_H
#define IDEM_CONFIG_KEYS_H

#include <stddef.h>
#include "idem_config.h"

/* At least the number of rows (checked where the table is). */
#define IDEM_CONFIG_MAX_KEYS 96

/* The row of [section] key.  Returns its index, or -1 for a key that is
 * not in the table. */
int idem_config_key_index(const char *section, const char *key);

/* The key of row i and, in *section, its section.  Returns NULL past the
 * last row (for the suggestions of unknown keys). */
const char *idem_config_key_at(size_t i, const char **section);

/* Whether the value of row i is a list that an indented continuation line
 * extends (plugins, allow, replay-omit-headers).  Returns 1 or 0. */
int idem_config_key_is_list(int i);

/* The i-th core section (from 0) in the order of the table, or NULL past
 * the last one. */
const char *idem_config_core_section(size_t i);

/*
 * Sets row i of cfg from the text v, checked against the row's type and
 * range; continued says that v continues the key's previous line (a list
 * then grows).  Returns NULL, or why v is bad: a constant string or one
 * written into why[size].
 */
const char *idem_config_key_set(idem_config *cfg, int i, const char *v,
    int continued, char *why, size_t size);

/* Sets every key of a zeroed cfg to the default of its row.  Returns
 * IDEM_OK, IDEM_ERR_NOMEM, or IDEM_ERR_CONFIG (logged) when a default or a
 * row is wrong: a bug of the table. */
idem_err idem_config_keys_defaults(idem_config *cfg);

/* Checks combinations of keys once the whole file is read, logging each
 * problem at the line of the key it names; seen[i] is the line where row
 * i was set, 0 when it was not. */
void idem_config_keys_check(idem_config *cfg,
    const unsigned seen[IDEM_CONFIG_MAX_KEYS]);

/* The route key named key (a [route METHOD PATH] section's,
 * idem_route_set's).  Returns its idem_route_key, or -1. */
int idem_route_key_index(const char *key);

/* The name of route key k ("lifetime"), or NULL for no such key. */
const char *idem_route_key_name(int k);

/* Whether route key k is a list that a continuation line extends. */
int idem_route_key_is_list(int k);

/*
 * Sets route key k of rc from the text v, checked as the [idempotency] key
 * of the same name is (its type and range), and marks it set; continued
 * as for idem_config_key_set.  Returns NULL, or why v is bad (a constant
 * string or one written into why[size]; idem_key_oom when out of memory).
 */
const char *idem_route_key_set(idem_route_conf *rc, int k, const char *v,
    int continued, char *why, size_t size);

/* Frees what rc owns and zeroes it. */
void idem_route_conf_clear(idem_route_conf *rc);

/* Frees what the keys of cfg own (not cfg itself). */
void idem_config_keys_free(idem_config *cfg);

#endif
