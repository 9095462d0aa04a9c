/*
 * handler.c - the handler every benchmark configuration serves: POST
 * /bench/{x} answers 201 with a small JSON body.  The same handler runs
 * bare (idempotency disabled) and under each store.
 */
#include "idemfcgi.h"

static idem_err
answer(const idem_request *req, idem_response *res, void *data)
{
	return idem_response_json(res, 201, json_pack("{s:s, s:b}", "x",
	    idem_request_param(req, "x"), "ok", 1));
}

static idem_err
setup(idem_app *app, void **data)
{
	return idem_route_add(app, "POST", "/bench/{x}", IDEM_POLICY_DEFAULT,
	    answer, NULL);
}

int
idem_plugin_init(idem_plugin *p)
{
	p->abi_version = IDEM_ABI_VERSION;
	p->name = "bench";
	p->setup = setup;
	return 0;
}
