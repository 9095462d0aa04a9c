/*
 * A plugin built against a later idemfcgi.h, whose idem_plugin has one
 * hook more after teardown.  GROWN in the environment says what it does:
 * unset, it leaves that hook NULL (the loader accepts it); "hook", it sets
 * it (refused: this server cannot run it); "small", it reports a
 * struct_size smaller than any idem_plugin (refused).
 */
#include <stdlib.h>
#include <string.h>

#include "idemfcgi.h"

struct later_plugin {
	idem_plugin base;
	void (*later_hook)(void);
};

static void
later(void)
{
}

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
	struct later_plugin *l = (struct later_plugin *)p;
	const char *how = getenv("GROWN");

	p->abi_version = IDEM_ABI_VERSION;
	p->struct_size = sizeof(*l);
	p->name = "grown";
	p->setup = setup;
	l->later_hook = NULL;
	if (how != NULL && strcmp(how, "hook") == 0)
		l->later_hook = later;
	if (how != NULL && strcmp(how, "small") == 0)
		p->struct_size = sizeof(unsigned int);
	return 0;
}
