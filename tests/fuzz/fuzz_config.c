/*
 * fuzz_config.c - libFuzzer harness for the config parser: any text is
 * either a config or a list of errors, never a crash or a leak.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idem_config.h"
#include "idem_log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int quiet = -1;
	char *text = malloc(size + 1);
	idem_config *cfg = NULL;
	uint64_t v;

	if (quiet < 0) {
		quiet = open("/dev/null", O_WRONLY);
		idem_log_set_fd(quiet);
	}
	memcpy(text, data, size);
	text[size] = '\0';
	if (idem_config_load_string(text, "fuzz.conf", &cfg) == IDEM_OK)
		idem_config_free(cfg);
	idem_parse_duration(text, &v);
	idem_parse_size(text, &v);
	free(text);
	return 0;
}
