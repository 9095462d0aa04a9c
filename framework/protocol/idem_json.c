/*
 * idem_json.c - canonical JSON for fingerprints: sorted keys, no white
 * space, numbers exactly as written; and the same with members left out
 * by JSON Pointer (fingerprint-ignore).
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "idem_key.h"

/* Dumps of canonical JSON: compact, and reals with 15 significant digits,
 * so that a number like 0.1 comes out as written. */
#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/*
 * The next number token of the JSON text s (len bytes) at or after *pos,
 * outside strings: sets *tok, *toklen and *pos past it.  Returns 1, or 0
 * at the end.
 */
static int
next_number(const char *s, size_t len, size_t *pos, const char **tok,
    size_t *toklen)
{
	size_t i = *pos, start;

	while (i < len && s[i] != '-' && (s[i] < '0' || s[i] > '9')) {
		if (s[i++] != '"')
			continue;
		for (; i < len && s[i] != '"'; i++)
			if (s[i] == '\\')
				i++;
		i++;
	}
	if (i >= len) {
		*pos = len;
		return 0;
	}
	for (start = i; i < len && (s[i] == '-' || s[i] == '+' ||
	    s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
	    (s[i] >= '0' && s[i] <= '9')); i++)
		;
	*tok = s + start;
	*toklen = i - start;
	*pos = i;
	return 1;
}

/* Whether a number token is an integer that jansson reads and writes back
 * unchanged: 0, or -?[1-9][0-9]{0,17}. */
static int
plain_integer(const char *tok, size_t len)
{
	size_t i = tok[0] == '-';

	if (len == 1 && tok[0] == '0')
		return 1;
	if (len <= i || len - i > 18 || tok[i] == '0')
		return 0;
	for (; i < len; i++)
		if (tok[i] < '0' || tok[i] > '9')
			return 0;
	return 1;
}

/*
 * Whether every number token of text (len bytes, parsed into j) comes out
 * of the canonical dump as written, so that two texts whose numbers differ
 * in any digit never share a canonical form.  Plain integers always do;
 * otherwise the tokens are compared with those of an unsorted dump, whose
 * numbers are in document order.  Returns 1, 0, or -1 when out of memory.
 */
static int
numbers_exact(const char *text, size_t len, const json_t *j)
{
	const char *a, *b;
	size_t pa = 0, pb = 0, la, lb, dlen;
	char *dump;
	int more, same = 1, plain = 1;

	while (plain && next_number(text, len, &pa, &a, &la))
		plain = plain_integer(a, la);
	if (plain)
		return 1;
	if ((dump = json_dumps(j, DUMP_FLAGS)) == NULL)
		return -1;
	dlen = strlen(dump);
	pa = 0;
	do {
		more = next_number(text, len, &pa, &a, &la);
		if (more != next_number(dump, dlen, &pb, &b, &lb) ||
		    (more && (la != lb || memcmp(a, b, la) != 0)))
			same = 0;
	} while (more && same);
	free(dump);
	return same;
}

/* The next reference token of a JSON Pointer at *p (past its '/'),
 * unescaped (~1 is '/', ~0 is '~') into tok (256 bytes); *p moves to the
 * next '/' or the end.  Returns 0, or -1 when it does not fit. */
static int
pointer_token(const char **p, char tok[256])
{
	size_t n = 0;

	for (; **p != '\0' && **p != '/'; (*p)++) {
		char c = **p;
		if (c == '~' && ((*p)[1] == '0' || (*p)[1] == '1'))
			c = *++*p == '0' ? '~' : '/';
		if (n == 255)
			return -1;
		tok[n++] = c;
	}
	tok[n] = '\0';
	return 0;
}

/* The element of array a that token tok names ("0", "12": no sign, no
 * leading zero), or NULL. */
static json_t *
array_at(json_t *a, const char *tok)
{
	size_t i, idx = 0;

	if (tok[0] == '\0' || (tok[0] == '0' && tok[1] != '\0'))
		return NULL;
	for (i = 0; tok[i] != '\0'; i++) {
		if (tok[i] < '0' || tok[i] > '9' || idx > 100000000)
			return NULL;
		idx = idx * 10 + (size_t)(tok[i] - '0');
	}
	return json_array_get(a, idx);
}

/* Removes from doc the object member the JSON Pointer ptr (RFC 6901)
 * names; a pointer that names nothing, or an array element, changes
 * nothing. */
static void
remove_member(json_t *doc, const char *ptr)
{
	const char *p = ptr;
	json_t *cur = doc;
	char tok[256];

	if (*p != '/')
		return;
	while (cur != NULL && *p == '/') {
		p++;
		if (pointer_token(&p, tok) != 0)
			return;
		if (*p == '\0') {
			if (json_is_object(cur))
				json_object_del(cur, tok);
			return;
		}
		cur = json_is_object(cur) ? json_object_get(cur, tok) :
		    json_is_array(cur) ? array_at(cur, tok) : NULL;
	}
}

char *
idem_json_canonical_without(const char *text, size_t len,
    char *const *pointers, size_t n)
{
	json_error_t err;
	json_t *j;
	char *out = NULL;
	size_t i;

	for (i = 0; i < len && isspace((unsigned char)text[i]); i++)
		;
	if (i == len || (text[i] != '{' && text[i] != '['))
		return NULL;
	if ((j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err)) == NULL)
		return NULL;
	/* every number of the whole text, left out or not, must come out as
	 * written: the check compares the text with the tree in order */
	if (numbers_exact(text, len, j) == 1) {
		for (i = 0; i < n; i++)
			remove_member(j, pointers[i]);
		out = json_dumps(j, DUMP_FLAGS | JSON_SORT_KEYS);
	}
	json_decref(j);
	return out;
}

char *
idem_json_canonical(const char *text, size_t len)
{
	return idem_json_canonical_without(text, len, NULL, 0);
}

/* The depth of nesting up to which idem_json_is_canonical looks; a
 * deeper text is left to idem_json_canonical. */
#define AS_IS_DEPTH 32

/* A JSON string at s[*i] (its opening quote) of printable ASCII with no
 * escape, which a dump writes back as it is: sets *str and *n to its
 * content and *i past it.  Returns 1, or 0 for any other string. */
static int
as_is_string(const char *s, size_t len, size_t *i, const char **str,
    size_t *n)
{
	size_t j;

	for (j = *i + 1; j < len && s[j] != '"'; j++)
		if ((unsigned char)s[j] < 0x20 || (unsigned char)s[j] > 0x7e ||
		    s[j] == '\\')
			return 0;
	if (j >= len)
		return 0;
	*str = s + *i + 1;
	*n = j - *i - 1;
	*i = j + 1;
	return 1;
}

/* Whether s[*i] starts the literal lit (true, false, null); advances *i
 * past it. */
static int
as_is_literal(const char *s, size_t len, size_t *i, const char *lit)
{
	size_t n = strlen(lit);

	if (len - *i < n || memcmp(s + *i, lit, n) != 0)
		return 0;
	*i += n;
	return 1;
}

/*
 * Whether the JSON value at s[*i] is written as its canonical dump writes
 * it (see idem_json_is_canonical), depth the containers around it;
 * advances *i past it.  Returns 1, or 0 when it is not, or may not be.
 */
static int
as_is_value(const char *s, size_t len, size_t *i, int depth)
{
	const char *key, *prev = NULL;
	size_t klen, plen = 0, start = *i;
	int c;

	if (*i >= len)
		return 0;
	switch (s[*i]) {
	case '"':
		return as_is_string(s, len, i, &key, &klen);
	case 't':
		return as_is_literal(s, len, i, "true");
	case 'f':
		return as_is_literal(s, len, i, "false");
	case 'n':
		return as_is_literal(s, len, i, "null");
	case '[':
		if (depth >= AS_IS_DEPTH)
			return 0;
		if (++(*i) < len && s[*i] == ']') {
			(*i)++;
			return 1;
		}
		for (;;) {
			if (!as_is_value(s, len, i, depth + 1) || *i >= len)
				return 0;
			if (s[(*i)++] == ']')
				return 1;
			if (s[*i - 1] != ',')
				return 0;
		}
	case '{':
		if (depth >= AS_IS_DEPTH)
			return 0;
		if (++(*i) < len && s[*i] == '}') {
			(*i)++;
			return 1;
		}
		for (;;) {
			if (*i >= len || s[*i] != '"' ||
			    !as_is_string(s, len, i, &key, &klen))
				return 0;
			/* keys strictly ascending, as a sorted dump writes
			 * them (bytewise, a prefix first): no duplicate */
			c = prev == NULL ? -1 :
			    memcmp(prev, key, plen < klen ? plen : klen);
			if (c > 0 || (c == 0 && plen >= klen))
				return 0;
			prev = key;
			plen = klen;
			if (*i >= len || s[(*i)++] != ':' ||
			    !as_is_value(s, len, i, depth + 1) || *i >= len)
				return 0;
			if (s[(*i)++] == '}')
				return 1;
			if (s[*i - 1] != ',')
				return 0;
		}
	default:
		/* a plain integer only (see plain_integer), not followed by
		 * a fraction or an exponent */
		if (s[*i] == '-')
			(*i)++;
		while (*i < len && s[*i] >= '0' && s[*i] <= '9')
			(*i)++;
		if (*i < len && (s[*i] == '.' || s[*i] == 'e' || s[*i] == 'E'))
			return 0;
		return *i > start && plain_integer(s + start, *i - start);
	}
}

int
idem_json_is_canonical(const char *text, size_t len)
{
	size_t i = 0;

	if (len == 0 || (text[0] != '{' && text[0] != '['))
		return 0;
	return as_is_value(text, len, &i, 0) && i == len;
}
