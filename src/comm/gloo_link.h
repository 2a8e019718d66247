// SPDX-License-Identifier: MIT
/* Private to src/comm: a C interface to gloo's TCP transport (gloo_link.cc, the only C++ file),
 * used by the gloo backend to move bytes between hosts; ddpc does every reduction itself.
 * A link is a full mesh of TCP pairs among `size` members, joined through ddpc's key-value store,
 * with a fixed set of staging buffers registered once, so a collective allocates nothing of ours.
 * Invariant: no C++ exception leaves gloo_link.cc; each becomes a status and a message. A buffer
 * has at most one pending send batch and one pending recv at a time (gloo's rule). */
#ifndef DDPC_COMM_GLOO_LINK_H
#define DDPC_COMM_GLOO_LINK_H

#include <ddpc/status.h>
#include <ddpc/store.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddpc__gloo_link ddpc__gloo_link;

/* Joins the mesh as member `rank` of `size`, listening on bind_addr (an IPv4 address of this
 * host that the others can reach), publishing and reading addresses in `store` under keys that
 * start with `prefix`. Registers nbuf staging buffers of buf_bytes each (64-byte aligned).
 * Errors: DDPC_ETIMEOUT (a member never published or connected by `deadline`), DDPC_EIO. */
ddpc_status ddpc__gloo_link_create(ddpc_store *store, const char *prefix, int rank, int size,
                                   const char *bind_addr, size_t buf_bytes, int nbuf,
                                   double deadline, ddpc__gloo_link **out);
/* Closes every connection (peers blocked on us fail at once) and frees the link. NULL: no-op. */
void ddpc__gloo_link_destroy(ddpc__gloo_link *link);

/* Staging buffer i: (buf_bytes). */
void *ddpc__gloo_link_buf(ddpc__gloo_link *link, int i);

/* Starts sending `bytes` from the start of buffer i to member `peer` (tag `slot`); every send must
 * be completed with ddpc__gloo_link_wait_send before the buffer is written again. */
ddpc_status ddpc__gloo_link_send(ddpc__gloo_link *link, int i, int peer, uint64_t slot,
                                 size_t bytes);
/* Posts a receive of at most buf_bytes from `peer` (tag `slot`) into buffer i. */
ddpc_status ddpc__gloo_link_recv(ddpc__gloo_link *link, int i, int peer, uint64_t slot);
/* Waits for one send (resp. the receive) on buffer i to complete, at most until `deadline`.
 * DDPC_ETIMEOUT when it passed (the link is then broken), DDPC_EPEER with gloo's reason when the
 * connection failed. The message is gloo's; callers add which collective and host. */
ddpc_status ddpc__gloo_link_wait_send(ddpc__gloo_link *link, int i, double deadline);
ddpc_status ddpc__gloo_link_wait_recv(ddpc__gloo_link *link, int i, double deadline);

#ifdef __cplusplus
}
#endif

#endif
