/*
 * idem_cidr.c - address blocks: parsing them, and matching a client.
 */
#include "config.h"

#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "idem_cidr.h"
#include "idem_parse.h"

/* Parses "ADDR" or "ADDR/BITS" (IPv4 or IPv6) into *out.  Returns 0 or
 * -1. */
int
idem_cidr_parse(const char *text, idem_cidr *out)
{
	char addr[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(text, '/');
	size_t len = slash != NULL ? (size_t)(slash - text) : strlen(text);
	long long bits;
	unsigned max;

	if (len == 0 || len >= sizeof(addr))
		return -1;
	memcpy(addr, text, len);
	addr[len] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, addr, out->addr) == 1) {
		out->family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
		out->family = AF_INET6;
		max = 128;
	} else {
		return -1;
	}
	out->bits = max;
	if (slash != NULL) {
		if (idem_parse_int(slash + 1, 0, max, &bits) != IDEM_OK)
			return -1;
		out->bits = (unsigned)bits;
	}
	return 0;
}

/* Whether the address a (4 bytes for AF_INET, 16 for AF_INET6, an
 * IPv4-mapped IPv6 address already turned into its IPv4 form) is in one of
 * the n blocks of list.  Returns 1 or 0. */
static int
match_bytes(const idem_cidr *list, size_t n, int family,
    const unsigned char *a)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned full = list[i].bits / 8, rest = list[i].bits % 8;
		/* a block made by hand may be out of bounds: never a match */
		if (list[i].family != family || list[i].bits > 128 ||
		    (family == AF_INET && list[i].bits > 32) ||
		    memcmp(list[i].addr, a, full) != 0)
			continue;
		if (rest == 0 || ((list[i].addr[full] ^ a[full]) &
		    (0xff << (8 - rest)) & 0xff) == 0)
			return 1;
	}
	return 0;
}

/* Whether the 16 bytes of an IPv6 address are ::ffff:a.b.c.d. */
static int
is_mapped(const unsigned char *a)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	    0xff, 0xff };

	return memcmp(a, mapped, 12) == 0;
}

/* Whether addr is in one of the n blocks of list.  Returns 1 or 0. */
int
idem_cidr_match(const idem_cidr *list, size_t n, const char *addr)
{
	unsigned char a[16];
	int family;

	if (addr == NULL)
		return 0;
	if (inet_pton(AF_INET, addr, a) == 1) {
		family = AF_INET;
	} else if (inet_pton(AF_INET6, addr, a) == 1) {
		family = AF_INET6;
		/* ::ffff:10.1.2.3 is an IPv4 client */
		if (is_mapped(a)) {
			memmove(a, a + 12, 4);
			family = AF_INET;
		}
	} else {
		return 0;
	}
	return match_bytes(list, n, family, a);
}

/* Whether the socket address sa (AF_INET or AF_INET6) is in one of the n
 * blocks of list.  Returns 1, 0, or -1 when sa is of another family. */
int
idem_cidr_match_sockaddr(const idem_cidr *list, size_t n,
    const struct sockaddr *sa)
{
	unsigned char a[16];

	if (sa == NULL)
		return -1;
	if (sa->sa_family == AF_INET) {
		memcpy(a, &((const struct sockaddr_in *)(const void *)sa)->sin_addr,
		    4);
		return match_bytes(list, n, AF_INET, a);
	}
	if (sa->sa_family != AF_INET6)
		return -1;
	memcpy(a, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
	    16);
	if (is_mapped(a)) {
		memmove(a, a + 12, 4);
		return match_bytes(list, n, AF_INET, a);
	}
	return match_bytes(list, n, AF_INET6, a);
}
