/*
 * fuzz_json.c - libFuzzer harness for the JSON canonicaliser: it never
 * crashes, and canonicalising a canonical text changes nothing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idem_key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *once = idem_json_canonical((const char *)data, size), *twice;

	if (once == NULL)
		return 0;
	twice = idem_json_canonical(once, strlen(once));
	if (twice == NULL || strcmp(once, twice) != 0)
		abort();
	free(once);
	free(twice);
	return 0;
}
