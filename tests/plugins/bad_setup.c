/* A plugin whose setup registers a malformed route and fails. */
#include "idemfcgi.h"

static idem_err
setup(idem_app *app, void **data)
{
	return idem_route_add(app, "POST", "no-leading-slash/{x",
	    IDEM_POLICY_DEFAULT, NULL, NULL);
}

IDEM_PLUGIN("bad_setup", setup, NULL, NULL)
