/* A plugin whose setup registers a malformed route and fails. */
#include "idemfcgi.h"

static idem_err
setup(idem_app *app, void **data)
{
	return idem_route_add(app, "POST", "no-leading-slash/{x",
	    IDEM_POLICY_DEFAULT, NULL, NULL);
}

int
idem_plugin_init(idem_plugin *p)
{
	p->abi_version = IDEM_ABI_VERSION;
	p->struct_size = sizeof(*p);
	p->name = "bad_setup";
	p->setup = setup;
	return 0;
}
