/* A plugin that does nothing, named by IDEM_TEST_PLUGIN_NAME when it is
 * loaded ("named" without it): for the names the loader must refuse. */
#include <stdio.h>
#include <stdlib.h>

#include "idemfcgi.h"

static char name[64] = "named";

static idem_err
setup(idem_app *app, void **data)
{
	(void)app;
	*data = NULL;
	return IDEM_OK;
}

int
idem_plugin_init(idem_plugin *p)
{
	const char *env = getenv("IDEM_TEST_PLUGIN_NAME");

	if (env != NULL)
		snprintf(name, sizeof(name), "%s", env);
	p->abi_version = IDEM_ABI_VERSION;
	p->struct_size = sizeof(*p);
	p->name = name;
	p->setup = setup;
	return 0;
}
