/* A plugin built for another plugin ABI: the loader must refuse it. */
#include "idemfcgi.h"

int
idem_plugin_init(idem_plugin *p)
{
	p->abi_version = 42;   /* no idemfcgi has it */
	p->name = "bad_abi";
	return 0;
}
