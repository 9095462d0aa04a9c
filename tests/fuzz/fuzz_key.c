/*
 * fuzz_key.c - libFuzzer harness for key validation: never crashes, and
 * the formats nest: a valid uuidv7 is a valid uuid is a valid opaque key,
 * which has only visible ASCII.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idem_key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *key = malloc(size + 1);
	int opaque, uuid, v7;
	size_t i;

	memcpy(key, data, size);
	key[size] = '\0';
	opaque = idem_key_valid(IDEM_KEY_OPAQUE, key, size);
	uuid = idem_key_valid(IDEM_KEY_UUID, key, size);
	v7 = idem_key_valid(IDEM_KEY_UUIDV7, key, size);
	if ((v7 && !uuid) || (uuid && !opaque))
		abort();
	for (i = 0; opaque && i < size; i++)
		if (data[i] < 0x21 || data[i] > 0x7e)
			abort();
	free(key);
	return 0;
}
