/*
 * fuzz_json.c - libFuzzer harness for the JSON canonicaliser: it never
 * crashes, canonicalising a canonical text changes nothing, and a
 * canonical form has exactly the number tokens of its text, digit for
 * digit (so texts whose numbers differ never share one); with members
 * left out (fingerprint-ignore) it is canonical exactly when the whole
 * text is, and a canonical form itself.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idem_key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The number tokens of the JSON text s (len bytes), outside strings, each
 * NUL-terminated, into a list the caller frees with its strings. */
static char **
numbers(const char *s, size_t len, size_t *n)
{
	char **out = calloc(len / 2 + 1, sizeof(char *));
	int in_string = 0;
	size_t i = 0, start;

	*n = 0;
	while (i < len) {
		if (in_string) {
			if (s[i] == '\\')
				i++;
			else if (s[i] == '"')
				in_string = 0;
			i++;
		} else if (s[i] == '"') {
			in_string = 1;
			i++;
		} else if (s[i] == '-' || (s[i] >= '0' && s[i] <= '9')) {
			start = i;
			while (i < len && s[i] != '\0' &&
			    strchr("+-.eE0123456789", s[i]) != NULL)
				i++;
			out[(*n)++] = strndup(s + start, i - start);
		} else {
			i++;
		}
	}
	return out;
}

static int
cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Frees a list of numbers. */
static void
free_list(char **l, size_t n)
{
	while (n > 0)
		free(l[--n]);
	free(l);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *const ptrs[] = { "/a", "/b/0/c", "/~1", "/", "/x~0y/1" };
	char *once = idem_json_canonical((const char *)data, size), *twice;
	char *pruned = idem_json_canonical_without((const char *)data, size,
	    ptrs, sizeof(ptrs) / sizeof(ptrs[0]));
	char **a, **b;
	size_t na, nb, i;

	/* members left out: canonical exactly when the whole is, and a
	 * canonical form itself */
	if ((pruned == NULL) != (once == NULL))
		abort();
	if (pruned != NULL) {
		twice = idem_json_canonical(pruned, strlen(pruned));
		if (twice == NULL || strcmp(pruned, twice) != 0)
			abort();
		free(twice);
		free(pruned);
	}
	if (once == NULL)
		return 0;
	twice = idem_json_canonical(once, strlen(once));
	if (twice == NULL || strcmp(once, twice) != 0)
		abort();
	a = numbers((const char *)data, size, &na);
	b = numbers(once, strlen(once), &nb);
	if (na != nb)
		abort();
	qsort(a, na, sizeof(char *), cmp);
	qsort(b, nb, sizeof(char *), cmp);
	for (i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			abort();
	free_list(a, na);
	free_list(b, nb);
	free(once);
	free(twice);
	return 0;
}
