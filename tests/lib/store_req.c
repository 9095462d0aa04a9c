/*
 * store_req.c - request descriptors for tests (store_req.h).
 */
#include <string.h>

#include "store_req.h"

idem_store_req *
test_req_fill(idem_store_req *rq, const idem_store_key *k,
    const unsigned char *fp, const char *owner, const char *rid)
{
	const idem_key_policy *pol = rq->policy;

	memset(rq, 0, sizeof(*rq));
	rq->policy = pol;
	if (k != NULL)
		rq->key = *k;
	if (fp != NULL)
		memcpy(rq->fp, fp, 32);
	idem_copy_string(rq->owner, sizeof(rq->owner), owner != NULL ? owner :
	    "");
	idem_copy_string(rq->request_id, sizeof(rq->request_id), rid != NULL ?
	    rid : "");
	return rq;
}
