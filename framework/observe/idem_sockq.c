/*
 * idem_sockq.c - the accept queue of a listening socket (idem_sockq.h).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>

#include "idem_sockq.h"

/* TCP_LISTEN of the kernel's socket states (include/net/tcp_states.h). */
#define STATE_LISTEN 10

/* The queue of the TCP listening socket fd.  IDEM_OK or
 * IDEM_ERR_INVALID. */
static idem_err
tcp_queue(int fd, uint64_t *queued, uint64_t *backlog)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
	    ti.tcpi_state != STATE_LISTEN)
		return IDEM_ERR_INVALID;
	*queued = ti.tcpi_unacked;
	*backlog = ti.tcpi_sacked;
	return IDEM_OK;
}

/* The queue of the unix listening socket fd, asked of sock_diag by its
 * inode.  IDEM_OK or IDEM_ERR_INVALID. */
static idem_err
unix_queue(int fd, uint64_t *queued, uint64_t *backlog)
{
	struct {
		struct nlmsghdr nlh;
		struct unix_diag_req req;
	} msg;
	union {
		struct nlmsghdr nlh;
		char buf[8192];
	} ans;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct nlmsghdr *h;
	struct stat st;
	idem_err err = IDEM_ERR_INVALID;
	ssize_t got;
	int n, nl;

	if (fstat(fd, &st) != 0)
		return IDEM_ERR_INVALID;
	if ((nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
	    NETLINK_SOCK_DIAG)) < 0)
		return IDEM_ERR_INVALID;
	memset(&msg, 0, sizeof(msg));
	msg.nlh.nlmsg_len = sizeof(msg);
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST;
	msg.req.sdiag_family = AF_UNIX;
	msg.req.udiag_states = 1U << STATE_LISTEN;
	msg.req.udiag_ino = (uint32_t)st.st_ino;
	msg.req.udiag_show = UDIAG_SHOW_RQLEN;
	msg.req.udiag_cookie[0] = msg.req.udiag_cookie[1] = ~0U;
	if (sendto(nl, &msg, sizeof(msg), 0, (struct sockaddr *)&sa,
	    sizeof(sa)) != (ssize_t)sizeof(msg)) {
		close(nl);
		return IDEM_ERR_INVALID;
	}
	do
		got = recv(nl, &ans, sizeof(ans), 0);
	while (got < 0 && errno == EINTR);
	close(nl);
	n = (int)got;
	for (h = &ans.nlh; n > 0 && NLMSG_OK(h, n);
	    h = NLMSG_NEXT(h, n)) {
		struct unix_diag_msg *um = NLMSG_DATA(h);
		struct rtattr *a;
		int left;

		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
		    h->nlmsg_len < NLMSG_LENGTH(sizeof(*um)) ||
		    um->udiag_ino != (uint32_t)st.st_ino)
			continue;
		left = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*um)));
		for (a = (struct rtattr *)(um + 1); RTA_OK(a, left);
		    a = RTA_NEXT(a, left)) {
			struct unix_diag_rqlen rq;
			if (a->rta_type != UNIX_DIAG_RQLEN ||
			    RTA_PAYLOAD(a) < sizeof(rq))
				continue;
			memcpy(&rq, RTA_DATA(a), sizeof(rq));
			*queued = rq.udiag_rqueue;
			*backlog = rq.udiag_wqueue;
			err = IDEM_OK;
		}
	}
	return err;
}

idem_err
idem_sockq_get(int fd, uint64_t *queued, uint64_t *backlog)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return IDEM_ERR_INVALID;
	if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
		return tcp_queue(fd, queued, backlog);
	if (ss.ss_family == AF_UNIX)
		return unix_queue(fd, queued, backlog);
	return IDEM_ERR_INVALID;
}
