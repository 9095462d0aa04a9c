/*
 * idem_cidr.h - address blocks, checked at request time: who may read the
 * metrics route ([metrics] allow), or any other list of trusted clients.
 *
 * A block is a plain value (an array of them is a list; no setup, no
 * free).  idem_cidr_parse reads "10.0.0.0/8", "::1" or "2001:db8::/32"
 * from config text, which is untrusted: anything else is refused.
 * idem_cidr_match takes the client address as the web server gives it in
 * REMOTE_ADDR, and matches an IPv4 client seen on an IPv6 socket
 * (::ffff:10.1.2.3) as the IPv4 address it is; idem_cidr_match_sockaddr
 * does the same for a socket's peer address (accept, getpeername).
 */
#ifndef IDEM_CIDR_H
#define IDEM_CIDR_H

#include <stddef.h>

/* An address block: family AF_INET or AF_INET6, the address in network
 * order, and the prefix length (at most 32 or 128). */
typedef struct idem_cidr {
	int family;
	unsigned char addr[16];
	unsigned bits;
} idem_cidr;

/* Parses "ADDR" (a whole address) or "ADDR/BITS", IPv4 or IPv6, into *out.
 * Returns 0, or -1 for anything else (*out is then undefined). */
int idem_cidr_parse(const char *text, idem_cidr *out);

/* Whether addr (a textual IPv4 or IPv6 address, as in REMOTE_ADDR) is in
 * one of the n blocks of list.  Returns 1 or 0 (also for a bad or NULL
 * addr). */
int idem_cidr_match(const idem_cidr *list, size_t n, const char *addr);

struct sockaddr;

/* Whether the peer address sa (borrowed) is in one of the n blocks of
 * list, an IPv4-mapped IPv6 address (a dual-stack socket's IPv4 peer) as
 * its IPv4 form.  Returns 1 or 0, or -1 when sa is neither AF_INET nor
 * AF_INET6 (a unix socket's peer: no address to check). */
int idem_cidr_match_sockaddr(const idem_cidr *list, size_t n,
    const struct sockaddr *sa);

#endif
