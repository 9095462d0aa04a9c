/*
 * idem_progress.c - recovery points, as a handler records and reads them
 * (idem_request_checkpoint, idem_request_phase, idem_request_progress;
 * DESIGN.md 2.8), over the middleware's execution of the request's record
 * (req->exec).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "idem_log.h"
#include "idem_request_log.h"
#include "idem_middleware_int.h"
#include "idem_request.h"
#include "idem_store_tx.h"

/* Whether phase is 1 to IDEM_PHASE_MAX bytes of letters, digits and
 * "._:-". */
static int
phase_ok(const char *phase)
{
	size_t n = 0;

	for (; phase[n] != '\0'; n++) {
		unsigned char ch = (unsigned char)phase[n];
		if (n >= IDEM_PHASE_MAX || !((ch >= 'a' && ch <= 'z') ||
		    (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    strchr("._:-", ch) != NULL))
			return 0;
	}
	return n > 0;
}

idem_err
idem_request_checkpoint(const idem_request *req, const char *phase,
    json_t *state)
{
	idem_exec *ex = req != NULL ? req->exec : NULL;
	idem_progress p;
	idem_err err;
	char *text = NULL;

	if (req == NULL || phase == NULL || !phase_ok(phase) ||
	    (state != NULL && !json_is_object(state)))
		return IDEM_ERR_INVALID;
	if (ex == NULL)
		return IDEM_ERR_NOT_FOUND;
	memset(&p, 0, sizeof(p));
	memcpy(p.phase, phase, strlen(phase) + 1);
	if (state != NULL) {
		if ((text = json_dumps(state, JSON_COMPACT | JSON_SORT_KEYS)) ==
		    NULL)
			return IDEM_ERR_NOMEM;
		p.state = text;
		p.state_len = strlen(text);
		if (p.state_len > IDEM_PROGRESS_MAX) {
			free(text);
			return IDEM_ERR_TOO_LARGE;
		}
	}
	err = ex->c != NULL ? idem_store_tx_checkpoint(ex->mw->store, ex->c,
	    ex->rq, &p) : idem_store_checkpoint(ex->mw->store, ex->rq, &p);
	idem_mw_count_contended(ex->mw, req, ex->rq);
	if (err == IDEM_OK) {
		idem_progress_clear(&ex->progress);
		ex->progress = p;
		idem_log_event(req, IDEM_LOG_DEBUG, "checkpoint", ex->rq->owner,
		    "progress recorded: phase %s (%zu bytes of state)", phase,
		    p.state_len);
		return IDEM_OK;
	}
	free(text);
	idem_log_event(req, err == IDEM_ERR_NOT_FOUND ? IDEM_LOG_WARN :
	    IDEM_LOG_ERROR, "checkpoint_failed", ex->rq->owner, "progress "
	    "(phase %s) not recorded: %s", phase, err == IDEM_ERR_NOT_FOUND ?
	    "this request no longer holds its reservation" :
	    idem_strerror(err));
	return err;
}

const char *
idem_request_phase(const idem_request *req)
{
	if (req == NULL || req->exec == NULL ||
	    req->exec->progress.phase[0] == '\0')
		return NULL;
	return req->exec->progress.phase;
}

json_t *
idem_request_progress(const idem_request *req)
{
	const idem_progress *p;

	if (req == NULL || req->exec == NULL)
		return NULL;
	p = &req->exec->progress;
	if (p->phase[0] == '\0' || p->state == NULL || p->state_len == 0)
		return NULL;
	return json_loadb(p->state, p->state_len, 0, NULL);
}
