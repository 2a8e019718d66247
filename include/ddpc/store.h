/* ddpc key-value store over TCP: the rendezvous point of a job that spans hosts, as torch's
 * TCPStore is for torchrun. One process serves it at MASTER_ADDR:MASTER_PORT (the node-0 launcher
 * under `ddpc run --nnodes`, else global rank 0); every worker and launcher connects as a client.
 * Keys are strings, values are bytes; a key once set can be overwritten, never removed. The
 * server is one thread; a client is used by one thread at a time. Every call that waits takes a
 * deadline (a ddpc_time_now() value) and fails with DDPC_ETIMEOUT naming the key or the address;
 * a lost connection is DDPC_EPEER naming the address. Connections that do not open with the
 * store's greeting are dropped, so a port scanner cannot disturb a job. */
#ifndef DDPC_STORE_H
#define DDPC_STORE_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    DDPC_STORE_KEY_MAX = 255,       /* bytes of a key */
    DDPC_STORE_VALUE_MAX = 16 << 20 /* bytes of a value */
};

typedef struct ddpc_store_server ddpc_store_server;
typedef struct ddpc_store ddpc_store;

/* Listens on bind_addr:port ("0.0.0.0" or NULL for every address; port 0 picks a free one) and
 * serves on its own thread until stopped. A port in use is DDPC_EIO naming it. */
ddpc_status ddpc_store_server_start(const char *bind_addr, int port, ddpc_store_server **out);
/* The port the server listens on. */
int ddpc_store_server_port(const ddpc_store_server *server);
/* Stops the thread, closes every connection and frees the server. NULL is a no-op. */
void ddpc_store_server_stop(ddpc_store_server *server);

/* Connects to addr:port, retrying until `deadline` (the server may start later). */
ddpc_status ddpc_store_connect(const char *addr, int port, double deadline, ddpc_store **out);
/* Closes the connection and frees the client. NULL is a no-op. */
void ddpc_store_close(ddpc_store *store);

/* Sets key to the len bytes at value. */
ddpc_status ddpc_store_set(ddpc_store *store, const char *key, const void *value, size_t len);
/* Copies key's value into buf (at most cap bytes; *len is the value's full length) if the key is
 * set, and says whether it was (*found). Never waits for the key. */
ddpc_status ddpc_store_try_get(ddpc_store *store, const char *key, void *buf, size_t cap,
                               size_t *len, bool *found);
/* As try_get, but waits until the key is set or `deadline` passes (DDPC_ETIMEOUT). */
ddpc_status ddpc_store_get(ddpc_store *store, const char *key, void *buf, size_t cap, size_t *len,
                           double deadline);
/* Adds delta to the 64-bit counter at key (absent counts as 0) and returns the new value in *out
 * (may be NULL). Atomic across clients: the way ranks take turns or count arrivals. */
ddpc_status ddpc_store_add(ddpc_store *store, const char *key, int64_t delta, int64_t *out);

#ifdef __cplusplus
}
#endif

#endif
