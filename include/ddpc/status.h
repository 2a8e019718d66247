// SPDX-License-Identifier: MIT
/* ddpc status codes and the thread-local last-error message.
 * Every function that can fail returns ddpc_status; DDPC_OK is 0 and every error is negative.
 * The message is one sentence naming the culprit; a caller never overwrites a callee's message. */
#ifndef DDPC_STATUS_H
#define DDPC_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description) */
#define DDPC_STATUS_TABLE(X)                                   \
    X(DDPC_OK, 0, "ok")                                        \
    X(DDPC_EINVAL, -1, "invalid argument")                     \
    X(DDPC_ENOMEM, -2, "out of memory")                        \
    X(DDPC_EIO, -3, "input/output error")                      \
    X(DDPC_EFORMAT, -4, "bad format")                          \
    X(DDPC_ETIMEOUT, -5, "timed out")                          \
    X(DDPC_EPEER, -6, "peer failure")                          \
    X(DDPC_EUNSUPPORTED, -7, "unsupported")                    \
    X(DDPC_EINTERNAL, -8, "internal error")

typedef enum {
#define DDPC_STATUS_ENUM(name, value, desc) name = value,
    DDPC_STATUS_TABLE(DDPC_STATUS_ENUM)
#undef DDPC_STATUS_ENUM
} ddpc_status;

/* "DDPC_EINVAL" style name of a status; "DDPC_UNKNOWN" for values outside the table. */
const char *ddpc_status_name(ddpc_status s);

/* Formats the thread-local error message and returns `code` unchanged. */
ddpc_status ddpc_errorf(ddpc_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The message set by the last ddpc_errorf on this thread ("" if none). Valid until the next error. */
const char *ddpc_last_error(void);

/* Clears this thread's message. */
void ddpc_clear_error(void);

/* Propagates a failing status to the caller. */
#define DDPC_TRY(expr)                          \
    do {                                        \
        ddpc_status ddpc_try_s_ = (expr);       \
        if (ddpc_try_s_ != DDPC_OK)             \
            return ddpc_try_s_;                 \
    } while (0)

/* For broken invariants only, never for user input: prints and aborts in every build type. */
void ddpc__assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define DDPC_ASSERT(cond) \
    ((cond) ? (void)0 : ddpc__assert_fail(#cond, __FILE__, __LINE__))

#ifdef __cplusplus
}
#endif
#endif
