/* A shared object without idem_plugin_init: the loader must refuse it. */
int not_a_plugin(void);

int
not_a_plugin(void)
{
	return 0;
}
