/*
 * fuzz_key.c - libFuzzer harness for key validation and the header parser:
 * never crashes; the formats nest (a valid uuidv7 is a valid uuid is a
 * valid opaque key, which has only visible ASCII); a parsed key is 1..255
 * bytes, valid, lower case for the UUID formats, and parses to itself when
 * sent again as an sf-string (and as a bare token, unless it starts with a
 * quote).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idem_key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parses header under fmt and checks what came out.  Returns whether it
 * was accepted. */
static int
parse(idem_key_format fmt, const char *header)
{
	char out[IDEM_KEY_MAX + 1], again[IDEM_KEY_MAX + 1];
	char quoted[2 * IDEM_KEY_MAX + 3];
	size_t len, len2, i, q = 0;

	if (idem_key_parse(fmt, header, out, &len) != IDEM_OK) {
		if (len != 0 || out[0] != '\0')
			abort();
		return 0;
	}
	if (len == 0 || len > IDEM_KEY_MAX || strlen(out) != len ||
	    !idem_key_valid(fmt, out, len))
		abort();
	for (i = 0; fmt != IDEM_KEY_OPAQUE && i < len; i++)
		if (out[i] >= 'A' && out[i] <= 'Z')
			abort();
	quoted[q++] = '"';
	for (i = 0; i < len; i++) {
		if (out[i] == '"' || out[i] == '\\')
			quoted[q++] = '\\';
		quoted[q++] = out[i];
	}
	strcpy(quoted + q, "\"");
	if (idem_key_parse(fmt, quoted, again, &len2) != IDEM_OK ||
	    len2 != len || memcmp(out, again, len) != 0)
		abort();
	if (out[0] != '"' && (idem_key_parse(fmt, out, again, &len2) !=
	    IDEM_OK || len2 != len || memcmp(out, again, len) != 0))
		abort();
	return 1;
}

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
	opaque = parse(IDEM_KEY_OPAQUE, key);
	uuid = parse(IDEM_KEY_UUID, key);
	v7 = parse(IDEM_KEY_UUIDV7, key);
	if ((v7 && !uuid) || (uuid && !opaque))
		abort();
	free(key);
	return 0;
}
