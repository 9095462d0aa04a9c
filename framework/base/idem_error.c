/*
 * idem_error.c - messages for idem_err.
 */
#include "config.h"

#include "idemfcgi.h"

const char *
idem_strerror(idem_err err)
{
	switch (err) {
	case IDEM_OK: return "success";
	case IDEM_ERR_NOMEM: return "out of memory";
	case IDEM_ERR_INVALID: return "invalid argument";
	case IDEM_ERR_CONFIG: return "bad configuration";
	case IDEM_ERR_PLUGIN: return "plugin error";
	case IDEM_ERR_IO: return "system call failed";
	case IDEM_ERR_PROTOCOL: return "malformed request";
	case IDEM_ERR_TOO_LARGE: return "limit exceeded";
	case IDEM_ERR_EXISTS: return "already exists";
	case IDEM_ERR_HANDLER: return "handler failed";
	case IDEM_ERR_STORE: return "idempotency store failed";
	case IDEM_ERR_NOT_FOUND: return "not found";
	case IDEM_ERR_BUSY: return "busy: contention on the same record";
	case IDEM_ERR_OUTCOME_UNKNOWN: return "outcome unknown: a side effect "
	    "may or may not have happened";
	}
	return "unknown error";
}
