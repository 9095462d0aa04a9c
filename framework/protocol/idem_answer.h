/*
 * idem_answer.h - the stored answer (DESIGN.md 2.4 and 2.5): which response
 * headers are stored for replay, how an answer is written for the store
 * and replayed from it, and the stand-in stored in its place when it is
 * too large to store.  Every path that commits an answer (the two-phase
 * commit, its deferred retry, a transactional route's record) prepares it
 * here, with idem_answer_prepare, so they all store the same thing.
 */
#ifndef IDEM_ANSWER_H
#define IDEM_ANSWER_H

#include "idem_config.h"
#include "idem_request.h"
#include "idem_store.h"

/* The header a replayed answer carries, with the value "true". */
#define IDEM_REPLAYED_HEADER "Idempotent-Replayed"

/*
 * Whether a response header named name (any case) is stored for replay:
 * not one of the fixed never-stored headers (Set-Cookie, Date,
 * X-Request-Id, the hop-by-hop ones, Idempotent-Replayed) nor one of cfg's
 * replay-omit-headers (cfg NULL: the fixed ones only).
 */
int idem_header_stored(const idem_config *cfg, const char *name);

/*
 * "Name: value\r\n" lines of res's headers to store for replay under cfg
 * (see idem_header_stored; caller frees); NULL when out of memory.  Only
 * what replay takes back is kept: headers idem_response_header would
 * refuse are left out, and at most IDEM_MAX_HEADERS, so the replay's own
 * header always fits.  res itself, the first answer, is not changed.
 */
char *idem_headers_serialize(const idem_config *cfg, const idem_response *res,
    size_t *len);

/*
 * Fills res from a stored answer (borrowed) plus Idempotent-Replayed,
 * which does not count against the handler's IDEM_MAX_HEADERS.  The
 * never-stored headers of cfg are dropped here too, should an answer
 * stored by an older version, or before replay-omit-headers named them,
 * carry them.  Returns IDEM_OK or an error (res then holds whatever was
 * built).
 */
idem_err idem_answer_replay(const idem_config *cfg,
    const idem_stored_response *sr, idem_response *res);

/* Why a store of limits lim (borrowed) cannot hold an answer of these
 * sizes under cfg's max-response, or NULL when it can (static text). */
const char *idem_answer_too_large(const idem_config *cfg,
    const idem_store_limits *lim, size_t headers_len, size_t body_len);

struct idem_stand_in;

/* An answer prepared for the store.  Its fields are read-only to callers;
 * idem_answer_clear frees what it holds. */
typedef struct idem_answer {
	idem_stored_response sr;     /* what to store: the answer (its body
	                              * borrowed from the response it was
	                              * made of), or its stand-in */
	idem_stored_response whole;  /* the answer as written, whether or not
	                              * it is what is stored */
	const char *why;             /* NULL while sr is the answer; else why
	                              * the stand-in is stored (static text) */
	char small[1024];            /* the usual few headers */
	char *heap;                  /* owned: longer headers */
	struct idem_stand_in *buf;   /* owned: the stand-in's room */
} idem_answer;

/*
 * Prepares res (borrowed: a->sr points into its body) as the answer to
 * store under cfg with the store's limits lim (borrowed).  When it cannot
 * be stored whole (over max-response or lim, or no memory for its
 * headers), a->sr is its stand-in and a->why says why.  Returns IDEM_OK,
 * or IDEM_ERR_NOMEM when not even the stand-in could be made (a->why
 * then says why it was needed).  Clear a with idem_answer_clear either
 * way.
 */
idem_err idem_answer_prepare(idem_answer *a, const idem_config *cfg,
    const idem_store_limits *lim, const idem_response *res);

/* The same for an answer already in its stored form (sr borrowed: a
 * deferred commit's). */
idem_err idem_answer_prepare_stored(idem_answer *a, const idem_config *cfg,
    const idem_store_limits *lim, const idem_stored_response *sr);

/*
 * The store refused a->sr as too large: makes a->sr the stand-in, a->why
 * why (static text).  Returns IDEM_OK, IDEM_ERR_TOO_LARGE when a->sr was
 * the stand-in already (which is always small enough: the store's limits
 * were refused at start-up otherwise), or IDEM_ERR_NOMEM.
 */
idem_err idem_answer_stand_in(idem_answer *a, const char *why);

/* Frees what a holds (not the response it was made of). */
void idem_answer_clear(idem_answer *a);

#endif
