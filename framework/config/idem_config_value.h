/*
 * idem_config_value.h - the types of value a row of the core sections'
 * table (idem_config_keys.c) names: how each is parsed, checked and freed;
 * not installed.
 */
#ifndef IDEM_CONFIG_VALUE_H
#define IDEM_CONFIG_VALUE_H

#include <stddef.h>
#include <stdint.h>
#include "idem_config.h"

typedef struct idem_key_def idem_key_def;

/* What a value parser gets. */
typedef struct idem_key_arg {
	idem_config *cfg;
	const idem_key_def *def; /* the row */
	void *field;             /* its field in cfg */
	void *aux;               /* its second field, or NULL */
	int continued;           /* the value continues the key's last line */
	char *why;               /* room for a message */
	size_t whysize;
} idem_key_arg;

/* How one type of value is parsed, checked and freed. */
typedef struct idem_key_type {
	/* Sets the field from v.  Returns NULL or why v is bad. */
	const char *(*parse)(const idem_key_arg *a, const char *v);
	/* Frees what the field owns; NULL when it owns nothing. */
	void (*release)(const idem_key_arg *a);
	size_t size;             /* the size of the field */
	int list;                /* a continuation line adds to the value */
	int aux;                 /* it needs the row's second field */
} idem_key_type;

/* One key. */
struct idem_key_def {
	const char *section;
	const char *key;
	const idem_key_type *type;
	size_t offset;           /* of the field in idem_config */
	size_t size;             /* of that field, checked against the type */
	size_t aux;              /* a second field: a list's count, the
	                         * scope's header name (0: none) */
	uint64_t min, max;       /* the range of a number, size or duration */
	const char *const *names; /* an enumeration's names (max + 1) */
	int nocase;              /* the names in any case */
	int off;                 /* "off" or empty sets the field to NULL */
	const char *def;         /* the default as text; NULL: none (the
	                         * field stays 0 or NULL) */
};

/* The message of a parser that ran out of memory (compared by address). */
extern const char idem_key_oom[];

/* The types of value. */
extern const idem_key_type
    idem_kt_string,
    idem_kt_bool,
    idem_kt_uint,
    idem_kt_u64,
    idem_kt_size,
    idem_kt_duration,
    idem_kt_enum,
    idem_kt_words,
    idem_kt_headers,
    idem_kt_pointers,
    idem_kt_blocks,
    idem_kt_listen,
    idem_kt_hosts,
    idem_kt_sockets,
    idem_kt_mode,
    idem_kt_mount,
    idem_kt_route_path,
    idem_kt_statuses,
    idem_kt_secret,
    idem_kt_scope;

/* commit-statuses as text into out (size bytes): "2xx 400 404", a whole
 * hundred as Nxx; the text parse_statuses reads (the policy route, the
 * OpenAPI document).  Returns out. */
char *idem_statuses_text(const unsigned char *table, char *out, size_t size);

#endif
