// SPDX-License-Identifier: MIT
/* The store's token (include/ddpc/store.h): a client with another token or none is refused at
 * once with a message naming the address, and its requests never reach the table; a recorded
 * greeting replayed, or the server's own proof reflected back, is dropped; a server without a
 * token listens on loopback only; tokens from the environment and from a 0600 file. */
#include "check.h"
#include "store_testutil.h"

#include <ddpc/status.h>
#include <ddpc/store.h>
#include <ddpc/timer.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static const char TOKEN[] = "the-job-token-0123456789abcdef";

static bool key_absent(int port, const char *key)
{
    ddpc_store *c = NULL;
    char buf[16];
    size_t len;
    bool found = true;
    bool ok = ddpc_store_connect("127.0.0.1", port, TOKEN, ddpc_time_now() + 10, &c) == DDPC_OK &&
              ddpc_store_try_get(c, key, buf, sizeof buf, &len, &found) == DDPC_OK;
    ddpc_store_close(c);
    return ok && !found;
}

/* Another token, or none: refused at once (no retrying until the deadline), message naming the
 * address; a stranger who sends a request after a wrong proof is closed and changes nothing. */
static void test_wrong_token_refused(void)
{
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    int port = ddpc_store_server_port(srv);
    ddpc_store *c = NULL;
    double t0 = ddpc_time_now();
    CHECK_EQ_INT(ddpc_store_connect("127.0.0.1", port, "another-token-0123456789", t0 + 30, &c),
                 DDPC_EINVAL);
    CHECK(c == NULL);
    CHECK(ddpc_time_now() - t0 < 5);
    char want[96];
    snprintf(want, sizeof want, "the store at 127.0.0.1:%d did not prove this job's token", port);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    CHECK_EQ_INT(ddpc_store_connect("127.0.0.1", port, NULL, ddpc_time_now() + 30, &c),
                 DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), want);
    /* A stranger proves a guessed token, then tries to write and to read. */
    int fd = raw_connect(port);
    unsigned char hello[DDPC__STORE_HELLO_LEN], challenge[DDPC__STORE_CHALLENGE_LEN];
    unsigned char mac[DDPC__STORE_MAC_LEN];
    CHECK(raw_hello(fd, hello, challenge));
    raw_proof("guessed-token-0123456789", hello, challenge, mac);
    CHECK(raw_write(fd, mac, sizeof mac));
    (void)raw_send_set(fd, "agent/abort", "forged");
    CHECK(raw_closed_within(fd, 5));
    close(fd);
    /* One that sends a request with no handshake at all. */
    fd = raw_connect(port);
    (void)raw_send_set(fd, "agent/abort", "forged");
    CHECK(raw_closed_within(fd, 10));
    close(fd);
    CHECK(key_absent(port, "agent/abort"));
    ddpc_store_server_stop(srv);
}

/* A greeting and proof recorded from a real exchange, replayed on a new connection, fail: the
 * server's nonce is fresh. The server's own proof sent back as the client's fails too. */
static void test_replay_and_reflection(void)
{
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    int port = ddpc_store_server_port(srv);
    int fd = raw_connect(port);
    unsigned char hello[DDPC__STORE_HELLO_LEN], challenge[DDPC__STORE_CHALLENGE_LEN];
    unsigned char mac[DDPC__STORE_MAC_LEN], server_mac[DDPC__STORE_MAC_LEN];
    CHECK(raw_hello(fd, hello, challenge));
    raw_proof(TOKEN, hello, challenge, mac);
    /* the server proved itself to us */
    ddpc__store_mac(TOKEN, "ddpc store server", hello + DDPC__STORE_GREETING_LEN,
                    challenge + DDPC__STORE_GREETING_LEN, server_mac);
    CHECK(memcmp(server_mac, challenge + DDPC__STORE_HELLO_LEN, sizeof server_mac) == 0);
    CHECK(raw_write(fd, mac, sizeof mac));
    CHECK(raw_send_set(fd, "real", "1"));
    ddpc__store_answer a;
    CHECK(raw_read(fd, &a, sizeof a) && a.status == DDPC__STORE_OK);
    close(fd);
    /* Replay: the recorded hello and proof on a new connection. */
    int again = raw_connect(port);
    unsigned char challenge2[DDPC__STORE_CHALLENGE_LEN];
    CHECK(raw_write(again, hello, sizeof hello));
    CHECK(raw_read(again, challenge2, sizeof challenge2));
    CHECK(memcmp(challenge2 + DDPC__STORE_GREETING_LEN, challenge + DDPC__STORE_GREETING_LEN,
                 DDPC__STORE_NONCE_LEN) != 0);
    CHECK(raw_write(again, mac, sizeof mac));
    (void)raw_send_set(again, "replayed", "1");
    CHECK(raw_closed_within(again, 5));
    close(again);
    /* Reflection: the server's proof of this very exchange offered as the client's. */
    int refl = raw_connect(port);
    CHECK(raw_hello(refl, hello, challenge));
    CHECK(raw_write(refl, challenge + DDPC__STORE_HELLO_LEN, DDPC__STORE_MAC_LEN));
    (void)raw_send_set(refl, "reflected", "1");
    CHECK(raw_closed_within(refl, 5));
    close(refl);
    CHECK(key_absent(port, "replayed"));
    CHECK(key_absent(port, "reflected"));
    CHECK(!key_absent(port, "real"));
    ddpc_store_server_stop(srv);
}

/* No token: only on loopback, and a client with a token does not trust such a server. */
static void test_tokenless_loopback_only(void)
{
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start(NULL, 0, NULL, &srv), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "a store without a token would let anyone who reaches "
                                          "0.0.0.0 join the job; set DDPC_STORE_TOKEN");
    CHECK_EQ_INT(ddpc_store_server_start("0.0.0.0", 0, "", &srv), DDPC_EINVAL);
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, NULL, &srv), DDPC_OK);
    int port = ddpc_store_server_port(srv);
    ddpc_store *c = NULL;
    CHECK_EQ_INT(ddpc_store_connect("127.0.0.1", port, "", ddpc_time_now() + 10, &c), DDPC_OK);
    CHECK_EQ_INT(ddpc_store_set(c, "k", "v", 1), DDPC_OK);
    ddpc_store_close(c);
    CHECK_EQ_INT(ddpc_store_connect("127.0.0.1", port, TOKEN, ddpc_time_now() + 10, &c),
                 DDPC_EINVAL);
    ddpc_store_server_stop(srv);
    CHECK(ddpc_store_addr_is_loopback("127.0.0.1"));
    CHECK(ddpc_store_addr_is_loopback("127.3.0.1"));
    CHECK(!ddpc_store_addr_is_loopback("10.0.0.1"));
    CHECK(!ddpc_store_addr_is_loopback("0.0.0.0"));
}

/* The server listens on the address it was given, not every address of the host. */
static void test_binds_the_given_address(void)
{
    ddpc_store_server *srv = NULL;
    CHECK_EQ_INT(ddpc_store_server_start("127.0.0.1", 0, TOKEN, &srv), DDPC_OK);
    int port = ddpc_store_server_port(srv);
    ddpc_store *c = NULL;
    CHECK_EQ_INT(ddpc_store_connect("127.0.0.2", port, TOKEN, ddpc_time_now() + 0.3, &c),
                 DDPC_ETIMEOUT);
    ddpc_store_server_stop(srv);
    /* An address that is not this host's (TEST-NET-1) is named with the way out. */
    CHECK_EQ_INT(ddpc_store_server_start("192.0.2.77", 0, TOKEN, &srv), DDPC_EIO);
    CHECK_STR_CONTAINS(ddpc_last_error(), "cannot listen on 192.0.2.77 (192.0.2.77): it is not an "
                                          "address of this host");
    CHECK_STR_CONTAINS(ddpc_last_error(), "set DDPC_STORE_BIND");
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    chmod(path, mode);
}

static void test_token_from_env(void)
{
    char tok[DDPC_STORE_TOKEN_MAX + 1], path[64], var[96];
    bool found = true;
    const char *none[] = {"PATH=/bin", NULL};
    CHECK_EQ_INT(ddpc_store_token_load(none, tok, sizeof tok, &found), DDPC_OK);
    CHECK(!found && tok[0] == '\0');
    const char *given[] = {"DDPC_STORE_TOKEN=abcdefghijklmnopq", NULL};
    CHECK_EQ_INT(ddpc_store_token_load(given, tok, sizeof tok, &found), DDPC_OK);
    CHECK(found && strcmp(tok, "abcdefghijklmnopq") == 0);
    const char *shorter[] = {"DDPC_STORE_TOKEN=abc", NULL};
    CHECK_EQ_INT(ddpc_store_token_load(shorter, tok, sizeof tok, &found), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "DDPC_STORE_TOKEN holds a 3-byte token; give 16 to 256");
    snprintf(path, sizeof path, "/tmp/ddpc_test_token_%d", (int)getpid());
    snprintf(var, sizeof var, "DDPC_STORE_TOKEN_FILE=%s", path);
    const char *file[] = {var, NULL};
    write_file(path, "0123456789abcdef0123\n", 0600);
    CHECK_EQ_INT(ddpc_store_token_load(file, tok, sizeof tok, &found), DDPC_OK);
    CHECK(found && strcmp(tok, "0123456789abcdef0123") == 0);
    write_file(path, "0123456789abcdef0123\n", 0644);
    CHECK_EQ_INT(ddpc_store_token_load(file, tok, sizeof tok, &found), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "has mode 0644, so other users can read or change");
    const char *both[] = {"DDPC_STORE_TOKEN=abcdefghijklmnopq", var, NULL};
    CHECK_EQ_INT(ddpc_store_token_load(both, tok, sizeof tok, &found), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "are both set");
    unlink(path);
    CHECK_EQ_INT(ddpc_store_token_load(file, tok, sizeof tok, &found), DDPC_EINVAL);
    CHECK_STR_CONTAINS(ddpc_last_error(), "cannot be opened");
    char a[80], b[80];
    CHECK_EQ_INT(ddpc_store_token_generate(a, sizeof a), DDPC_OK);
    CHECK_EQ_INT(ddpc_store_token_generate(b, sizeof b), DDPC_OK);
    CHECK(strlen(a) == 64 && strcmp(a, b) != 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    RUN_TEST(test_wrong_token_refused);
    RUN_TEST(test_replay_and_reflection);
    RUN_TEST(test_tokenless_loopback_only);
    RUN_TEST(test_binds_the_given_address);
    RUN_TEST(test_token_from_env);
    return check_summary();
}
