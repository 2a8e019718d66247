// SPDX-License-Identifier: MIT
/* The store's secret: the job's token (from the environment or a file, or freshly generated) and
 * the handshake's MACs and nonces, all from libcrypto (HMAC-SHA256, RAND_bytes, CRYPTO_memcmp)
 * rather than anything of our own. Invariant: a token never leaves this process except as the
 * environment a launcher gives its own workers; the wire carries only MACs over fresh nonces. */
#include "comm/store_wire.h"

#include <ddpc/comm.h>
#include <ddpc/store.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

void ddpc__store_mac(const char *token, const char *label, const unsigned char *client_nonce,
                     const unsigned char *server_nonce, unsigned char *mac)
{
    unsigned char msg[64 + 2 * DDPC__STORE_NONCE_LEN];
    size_t n = strlen(label);
    memcpy(msg, label, n);
    memcpy(msg + n, client_nonce, DDPC__STORE_NONCE_LEN);
    memcpy(msg + n + DDPC__STORE_NONCE_LEN, server_nonce, DDPC__STORE_NONCE_LEN);
    const char *key = token ? token : "";
    unsigned int len = DDPC__STORE_MAC_LEN;
    /* An empty key is a valid HMAC key: a tokenless store (loopback only) runs the same steps. */
    HMAC(EVP_sha256(), key, (int)strlen(key), msg, n + 2 * DDPC__STORE_NONCE_LEN, mac, &len);
}

bool ddpc__store_mac_equal(const unsigned char *a, const unsigned char *b)
{
    return CRYPTO_memcmp(a, b, DDPC__STORE_MAC_LEN) == 0;
}

bool ddpc__store_random(void *buf, size_t len)
{
    return RAND_bytes(buf, (int)len) == 1;
}

ddpc_status ddpc_store_token_generate(char *out, size_t cap)
{
    unsigned char raw[32];
    if (cap < 2 * sizeof raw + 1)
        return ddpc_errorf(DDPC_EINVAL, "a store token needs %zu bytes, the buffer has %zu",
                           2 * sizeof raw + 1, cap);
    if (!ddpc__store_random(raw, sizeof raw))
        return ddpc_errorf(DDPC_EIO, "the system's random generator gave no bytes for a token");
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return DDPC_OK;
}

static ddpc_status check_token(const char *from, const char *t)
{
    size_t n = strlen(t);
    if (n < DDPC_STORE_TOKEN_MIN || n > DDPC_STORE_TOKEN_MAX)
        return ddpc_errorf(DDPC_EINVAL,
                           "%s holds a %zu-byte token; give %d to %d bytes (e.g. the 64 hex digits "
                           "of 'openssl rand -hex 32')",
                           from, n, DDPC_STORE_TOKEN_MIN, DDPC_STORE_TOKEN_MAX);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= ' ' || t[i] == 0x7f)
            return ddpc_errorf(DDPC_EINVAL,
                               "%s holds a token with a space or control byte at offset %zu", from,
                               i);
    return DDPC_OK;
}

/* Reads the token file: one line, readable by its owner (this user) only, since anyone who can
 * read it can join the job. */
static ddpc_status read_token_file(const char *path, char *out, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return ddpc_errorf(DDPC_EINVAL, "DDPC_STORE_TOKEN_FILE=%s cannot be opened: %s", path,
                           strerror(errno));
    struct stat st;
    ddpc_status s = DDPC_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        s = ddpc_errorf(DDPC_EINVAL, "DDPC_STORE_TOKEN_FILE=%s is not a regular file", path);
    else if (st.st_uid != geteuid())
        s = ddpc_errorf(DDPC_EINVAL,
                        "DDPC_STORE_TOKEN_FILE=%s belongs to another user (uid %u); the token "
                        "file must be your own",
                        path, (unsigned)st.st_uid);
    else if ((st.st_mode & 077) != 0)
        s = ddpc_errorf(DDPC_EINVAL,
                        "DDPC_STORE_TOKEN_FILE=%s has mode %04o, so other users can read or change "
                        "the job's token; chmod 600 it",
                        path, (unsigned)(st.st_mode & 07777));
    ssize_t got = 0;
    if (s == DDPC_OK) {
        got = read(fd, out, cap - 1);
        if (got < 0)
            s = ddpc_errorf(DDPC_EINVAL, "DDPC_STORE_TOKEN_FILE=%s cannot be read: %s", path,
                            strerror(errno));
    }
    close(fd);
    if (s != DDPC_OK)
        return s;
    out[got] = '\0';
    out[strcspn(out, "\r\n")] = '\0'; /* one line, as `openssl rand -hex 32 > f` writes it */
    char from[1100];
    snprintf(from, sizeof from, "DDPC_STORE_TOKEN_FILE=%.1000s", path);
    return check_token(from, out);
}

ddpc_status ddpc_store_token_load(const char *const *envp, char *out, size_t cap, bool *found)
{
    *found = false;
    out[0] = '\0';
    if (cap <= DDPC_STORE_TOKEN_MAX)
        return ddpc_errorf(DDPC_EINVAL, "a store token needs %d bytes, the buffer has %zu",
                           DDPC_STORE_TOKEN_MAX + 1, cap);
    const char *tok = ddpc_comm_env_lookup(envp, "DDPC_STORE_TOKEN");
    const char *file = ddpc_comm_env_lookup(envp, "DDPC_STORE_TOKEN_FILE");
    if (tok && file)
        return ddpc_errorf(DDPC_EINVAL, "DDPC_STORE_TOKEN and DDPC_STORE_TOKEN_FILE are both set; "
                                        "give the job's token one way");
    if (tok) {
        DDPC_TRY(check_token("DDPC_STORE_TOKEN", tok));
        snprintf(out, cap, "%s", tok);
    } else if (file) {
        char buf[DDPC_STORE_TOKEN_MAX + 2];
        DDPC_TRY(read_token_file(file, buf, sizeof buf));
        snprintf(out, cap, "%s", buf);
    } else {
        return DDPC_OK;
    }
    *found = true;
    return DDPC_OK;
}

bool ddpc_store_addr_is_loopback(const char *addr)
{
    if (!addr || !addr[0])
        return false;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(addr, NULL, &hints, &res) != 0 || !res)
        return false;
    bool loop = true;
    for (struct addrinfo *r = res; r; r = r->ai_next) {
        uint32_t a = ntohl(((struct sockaddr_in *)r->ai_addr)->sin_addr.s_addr);
        loop = loop && (a >> 24) == 127;
    }
    freeaddrinfo(res);
    return loop;
}
