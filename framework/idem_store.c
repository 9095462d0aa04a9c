/*
 * idem_store.c - the store wrappers and the helpers every store shares.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "idem_store.h"

idem_err
idem_store_reserve(idem_store *s, const idem_store_key *k,
    const unsigned char fp[32], const char *owner, const char *request_id,
    uint64_t inflight_ttl_ms, uint64_t lifetime_ms, idem_reserve_result *out)
{
	memset(out, 0, sizeof(*out));
	return s->ops->reserve(s, k, fp, owner, request_id, inflight_ttl_ms,
	    lifetime_ms, out);
}

idem_err
idem_store_commit(idem_store *s, const idem_store_key *k, const char *owner,
    const idem_stored_response *resp, uint64_t lifetime_ms)
{
	return s->ops->commit(s, k, owner, resp, lifetime_ms);
}

idem_err
idem_store_release(idem_store *s, const idem_store_key *k, const char *owner)
{
	return s->ops->release(s, k, owner);
}

idem_err
idem_store_renew(idem_store *s, const idem_store_key *k, const char *owner)
{
	return s->ops->renew(s, k, owner);
}

idem_err
idem_store_purge(idem_store *s, unsigned max, unsigned *purged)
{
	*purged = 0;
	return s->ops->purge(s, max, purged);
}

idem_err
idem_store_release_prefix(idem_store *s, const char *prefix,
    idem_store_key **keys, size_t *n)
{
	*keys = NULL;
	*n = 0;
	if (s->ops->release_prefix == NULL)
		return IDEM_OK;
	return s->ops->release_prefix(s, prefix, keys, n);
}

void
idem_store_stats_get(idem_store *s, idem_store_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (s->ops->stats != NULL)
		s->ops->stats(s, st);
}

void
idem_store_close(idem_store *s)
{
	if (s != NULL)
		s->ops->close(s);
}

void
idem_stored_response_clear(idem_stored_response *resp)
{
	free(resp->headers);
	free(resp->body);
	memset(resp, 0, sizeof(*resp));
}

void
idem_reserve_result_clear(idem_reserve_result *r)
{
	idem_stored_response_clear(&r->response);
	memset(r, 0, sizeof(*r));
}

idem_err
idem_stored_response_copy(idem_stored_response *dst,
    const idem_stored_response *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->status = src->status;
	dst->headers = malloc(src->headers_len + 1);
	dst->body = malloc(src->body_len + 1);
	if (dst->headers == NULL || dst->body == NULL) {
		idem_stored_response_clear(dst);
		return IDEM_ERR_NOMEM;
	}
	if (src->headers_len > 0)
		memcpy(dst->headers, src->headers, src->headers_len);
	dst->headers[src->headers_len] = '\0';
	dst->headers_len = src->headers_len;
	if (src->body_len > 0)
		memcpy(dst->body, src->body, src->body_len);
	dst->body[src->body_len] = '\0';
	dst->body_len = src->body_len;
	return IDEM_OK;
}
