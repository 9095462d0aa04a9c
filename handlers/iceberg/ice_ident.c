/*
 * ice_ident.c - names, namespaces, query parameters and page tokens of the
 * Iceberg catalog's requests (ice_ident.h).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ice_cat.h"
#include "ice_ident.h"

int
ice_name_ok(const char *s, size_t len)
{
	json_t *utf8;
	size_t i;

	if (len == 0 || len > ICE_NAME_MAX || (s[0] == '.' && (len == 1 ||
	    (len == 2 && s[1] == '.'))))
		return 0;
	for (i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 0;
	/* UTF-8, as JSON strings are: jansson checks it */
	if ((utf8 = json_stringn(s, len)) == NULL)
		return 0;
	json_decref(utf8);
	return 1;
}

int
ice_dir_up(char *dir, size_t rootlen)
{
	char *slash = strrchr(dir, '/');

	if (slash == NULL || (size_t)(slash - dir) <= rootlen)
		return -1;
	*slash = '\0';
	return 0;
}

char *
ice_ns_from_param(const char *param)
{
	const char *p = param, *end;
	size_t len = strlen(param);
	char *key;

	if (len == 0 || len > ICE_NS_MAX)
		return NULL;
	for (;;) {
		end = strchr(p, ICE_SEP);
		if (!ice_name_ok(p, end != NULL ? (size_t)(end - p) : strlen(p)))
			return NULL;
		if (end == NULL)
			break;
		p = end + 1;
	}
	key = strdup(param);
	return key;
}

char *
ice_ns_from_json(const json_t *parts, int allow_empty)
{
	size_t i, len = 0;
	json_t *v;
	char *key, *p;

	if (!json_is_array(parts) || (json_array_size(parts) == 0 &&
	    !allow_empty))
		return NULL;
	json_array_foreach(parts, i, v) {
		if (!json_is_string(v) || !ice_name_ok(json_string_value(v),
		    json_string_length(v)))
			return NULL;
		len += json_string_length(v) + 1;
	}
	if (len > ICE_NS_MAX + 1 || (key = malloc(len + 1)) == NULL)
		return NULL;
	p = key;
	json_array_foreach(parts, i, v) {
		if (i > 0)
			*p++ = ICE_SEP;
		memcpy(p, json_string_value(v), json_string_length(v));
		p += json_string_length(v);
	}
	*p = '\0';
	return key;
}

json_t *
ice_ns_to_json(const char *key)
{
	json_t *a = json_array();
	const char *p = key, *end;

	if (a == NULL || *key == '\0')
		return a;
	for (;;) {
		end = strchr(p, ICE_SEP);
		if (json_array_append_new(a, json_stringn(p, end != NULL ?
		    (size_t)(end - p) : strlen(p))) != 0) {
			json_decref(a);
			return NULL;
		}
		if (end == NULL)
			return a;
		p = end + 1;
	}
}

char *
ice_ns_parent(const char *key)
{
	const char *last = strrchr(key, ICE_SEP);

	return last != NULL ? strndup(key, (size_t)(last - key)) : strdup("");
}

/* The value of hex digit c, or -1. */
static int
hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Form-decodes s (n bytes) into a new string; NULL when malformed (a bad
 * escape, a NUL). */
static char *
form_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;
	size_t i;

	if (out == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (c == '+')
			c = ' ';
		else if (c == '%') {
			int hi = i + 2 < n ? hex(s[i + 1]) : -1;
			int lo = i + 2 < n ? hex(s[i + 2]) : -1;
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				free(out);
				return NULL;
			}
			c = (char)(hi * 16 + lo);
			i += 2;
		}
		*o++ = c;
	}
	*o = '\0';
	return out;
}

char *
ice_query(const char *query, const char *name, int *bad)
{
	size_t nl = strlen(name);
	const char *p = query;

	*bad = 0;
	while (p != NULL && *p != '\0') {
		const char *amp = strchr(p, '&');
		size_t len = amp != NULL ? (size_t)(amp - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		char *k = form_decode(p, eq != NULL ? (size_t)(eq - p) : len);
		int match = k != NULL && strlen(k) == nl &&
		    memcmp(k, name, nl) == 0;

		free(k);
		if (match) {
			char *v = eq != NULL ? form_decode(eq + 1,
			    len - (size_t)(eq + 1 - p)) : strdup("");
			*bad = v == NULL;
			return v;
		}
		p = amp != NULL ? amp + 1 : NULL;
	}
	return NULL;
}

char *
ice_token_encode(const char *name)
{
	size_t i, n = strlen(name);
	char *t = malloc(2 * n + 1);

	if (t == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		sprintf(t + 2 * i, "%02x", (unsigned char)name[i]);
	t[2 * n] = '\0';
	return t;
}

char *
ice_token_decode(const char *token)
{
	size_t i, n = strlen(token);
	char *s;

	if (n % 2 != 0 || n > 2 * (ICE_NS_MAX + 1) ||
	    (s = malloc(n / 2 + 1)) == NULL)
		return NULL;
	for (i = 0; i < n / 2; i++) {
		int hi = hex(token[2 * i]), lo = hex(token[2 * i + 1]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(s);
			return NULL;
		}
		s[i] = (char)(hi * 16 + lo);
	}
	s[n / 2] = '\0';
	return s;
}

void
ice_iso_duration(uint64_t ms, char *out, size_t size)
{
	uint64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60,
	    frac = ms % 1000;
	size_t n;

	n = (size_t)snprintf(out, size, "PT");
	if (h > 0 && n < size)
		n += (size_t)snprintf(out + n, size - n, "%lluH",
		    (unsigned long long)h);
	if (m > 0 && n < size)
		n += (size_t)snprintf(out + n, size - n, "%lluM",
		    (unsigned long long)m);
	if ((s > 0 || frac > 0 || ms == 0) && n < size) {
		if (frac == 0)
			snprintf(out + n, size - n, "%lluS",
			    (unsigned long long)s);
		else {
			char f[8];
			size_t k;
			snprintf(f, sizeof(f), "%03llu",
			    (unsigned long long)frac);
			for (k = strlen(f); k > 0 && f[k - 1] == '0'; k--)
				f[k - 1] = '\0';
			snprintf(out + n, size - n, "%llu.%sS",
			    (unsigned long long)s, f);
		}
	}
}
