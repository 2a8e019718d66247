// SPDX-License-Identifier: MIT
/* ddpc key-value store over TCP: the rendezvous point of a job that spans hosts, as torch's
 * TCPStore is for torchrun. One process serves it at MASTER_ADDR:MASTER_PORT (the node-0 launcher
 * under `ddpc run --nnodes`, else global rank 0); every worker and launcher connects as a client.
 * Keys are strings, values are bytes; a key once set can be overwritten, never removed. The
 * server is one thread; a client is used by one thread at a time. Every call that waits takes a
 * deadline (a ddpc_time_now() value) and fails with DDPC_ETIMEOUT naming the key or the address;
 * a lost connection is DDPC_EPEER naming the address. Each connection opens with a mutual proof
 * of the job's token (HMAC-SHA256 over both sides' nonces; the token itself never crosses the
 * wire); the server drops a peer that cannot prove it, so a stranger can neither read nor write.
 * The token authenticates the rendezvous only: nothing is encrypted. */
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
    DDPC_STORE_KEY_MAX = 255,        /* bytes of a key */
    DDPC_STORE_VALUE_MAX = 16 << 20, /* bytes of a value */
    DDPC_STORE_BYTES_MAX = 64 << 20, /* bytes of all keys and values together */
    DDPC_STORE_KEYS_MAX = 65536,     /* keys */
    DDPC_STORE_TOKEN_MIN = 16,       /* bytes of a token a user gives */
    DDPC_STORE_TOKEN_MAX = 256       /* bytes of a token */
};

typedef struct ddpc_store_server ddpc_store_server;
typedef struct ddpc_store ddpc_store;

/* Listens on bind_addr:port ("0.0.0.0" or NULL for every address; port 0 picks a free one) and
 * serves on its own thread until stopped, to clients that prove `token` (borrowed for the call).
 * A NULL or empty token is allowed only on a loopback address (DDPC_EINVAL otherwise). A port in
 * use, or an address that is not this host's, is DDPC_EIO naming it. */
ddpc_status ddpc_store_server_start(const char *bind_addr, int port, const char *token,
                                    ddpc_store_server **out);
/* The port the server listens on. */
int ddpc_store_server_port(const ddpc_store_server *server);
/* Stops the thread, closes every connection and frees the server. NULL is a no-op. */
void ddpc_store_server_stop(ddpc_store_server *server);

/* Connects to addr:port, retrying until `deadline` (the server may start later), and proves
 * `token` (NULL or empty: none) while checking the server's proof of it. A server that proves
 * another token fails at once with DDPC_EINVAL naming the address. */
ddpc_status ddpc_store_connect(const char *addr, int port, const char *token, double deadline,
                               ddpc_store **out);
/* Closes the connection and frees the client. NULL is a no-op. */
void ddpc_store_close(ddpc_store *store);

/* Sets key to the len bytes at value. A store already holding DDPC_STORE_BYTES_MAX bytes or
 * DDPC_STORE_KEYS_MAX keys refuses it: DDPC_EINVAL naming the key, the connection still usable. */
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

/* The job's token from `envp`: DDPC_STORE_TOKEN, or the contents of the file DDPC_STORE_TOKEN_FILE
 * names (a regular file of this user that no other user may read or write, one line). Copies it
 * to out (cap > DDPC_STORE_TOKEN_MAX) and sets *found; neither set is DDPC_OK with *found false.
 * DDPC_EINVAL naming the variable for both set, an unsafe or unreadable file, or a token shorter
 * than DDPC_STORE_TOKEN_MIN, longer than DDPC_STORE_TOKEN_MAX, or with spaces or control bytes. */
ddpc_status ddpc_store_token_load(const char *const *envp, char *out, size_t cap, bool *found);
/* A fresh token of 64 hex digits (256 random bits) into out (cap > 64). DDPC_EIO when the system
 * has no randomness to give. */
ddpc_status ddpc_store_token_generate(char *out, size_t cap);
/* Whether addr is a loopback IPv4 address or a name that resolves to one (127.0.0.0/8). */
bool ddpc_store_addr_is_loopback(const char *addr);

#ifdef __cplusplus
}
#endif

#endif
