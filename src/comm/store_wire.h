// SPDX-License-Identifier: MIT
/* Private to the store: the bytes on the wire between store_server.c and store_client.c.
 * A connection opens with the handshake: the client sends GREETING + its nonce; the server
 * answers GREETING + its nonce + MAC("server"); the client checks it and sends MAC("client"),
 * where MAC(label) = HMAC-SHA256(token, label || client nonce || server nonce). Fresh nonces on
 * both sides stop replay, the labels stop reflection. Then each request is a header, the key and
 * the value, answered by a reply header and its value. Integers are little-endian as on every
 * host ddpc supports (x86-64, aarch64): the header is memcpy'd, not byte-swapped. */
#ifndef DDPC_COMM_STORE_WIRE_H
#define DDPC_COMM_STORE_WIRE_H

#include <ddpc/status.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DDPC__STORE_GREETING "DDPCKV2\n"
enum {
    DDPC__STORE_GREETING_LEN = 8,
    DDPC__STORE_NONCE_LEN = 32,
    DDPC__STORE_MAC_LEN = 32,
    DDPC__STORE_HELLO_LEN = DDPC__STORE_GREETING_LEN + DDPC__STORE_NONCE_LEN, /* client's */
    DDPC__STORE_CHALLENGE_LEN = DDPC__STORE_HELLO_LEN + DDPC__STORE_MAC_LEN   /* server's */
};

typedef enum { DDPC__STORE_SET = 1, DDPC__STORE_GET = 2, DDPC__STORE_ADD = 3 } ddpc__store_op;
typedef enum {
    DDPC__STORE_OK = 0,
    DDPC__STORE_ABSENT = 1,
    DDPC__STORE_BAD = 2,
    DDPC__STORE_FULL = 3 /* a SET over DDPC_STORE_BYTES_MAX or DDPC_STORE_KEYS_MAX */
} ddpc__store_reply;

typedef struct {
    uint32_t op;      /* ddpc__store_op */
    uint32_t key_len; /* 1..DDPC_STORE_KEY_MAX */
    uint64_t value_len;
} ddpc__store_request;

typedef struct {
    uint32_t status; /* ddpc__store_reply */
    uint32_t pad;
    uint64_t value_len;
} ddpc__store_answer;

/* Reads exactly len bytes before `deadline` (ddpc_time_now() value). False on timeout, error or
 * a closed connection; *timed_out tells the first apart. */
bool ddpc__store_read(int fd, void *buf, size_t len, double deadline, bool *timed_out);
/* Writes all len bytes before `deadline`; false otherwise. */
bool ddpc__store_write(int fd, const void *buf, size_t len, double deadline);

/* MAC(label) of the handshake into mac (DDPC__STORE_MAC_LEN bytes); token NULL means "". */
void ddpc__store_mac(const char *token, const char *label, const unsigned char *client_nonce,
                     const unsigned char *server_nonce, unsigned char *mac);
/* Constant-time comparison of two MACs. */
bool ddpc__store_mac_equal(const unsigned char *a, const unsigned char *b);
/* len bytes from the system's cryptographic generator; false when it has none to give. */
bool ddpc__store_random(void *buf, size_t len);

#endif
