// SPDX-License-Identifier: MIT
/* The vocabulary struct shared by vocab.c (tables and lookup), vocab_io.c (save, load) and
 * vocab_text.c (tokenizer, encode, decode). Invariant: tokens[0..3] are the specials, every token
 * is distinct, and slots is an open-addressing table (power-of-two cap, at most half full) of the
 * ids, keyed by the token's bytes. */
#ifndef DDPC_DATA_VOCAB_IMPL_H
#define DDPC_DATA_VOCAB_IMPL_H

#include <ddpc/vocab.h>

struct ddpc_vocab {
    ddpc_tokenize tok;
    int64_t min_freq;
    int64_t size;
    char **tokens;   /* (size) NUL-terminated, owned */
    size_t *lens;    /* (size) bytes of each token */
    int64_t *counts; /* (size) occurrences in the corpus it was built from; 0 for specials */
    int32_t *slots;  /* (cap) ids, -1 = empty */
    size_t cap;
};

extern const char *const ddpc__vocab_specials[DDPC_VOCAB_SPECIALS];

/* FNV-1a of s[0, len). */
uint64_t ddpc__vocab_hash(const char *s, size_t len);
/* An empty vocabulary with room for `size` entries (tokens NULL), or NULL when out of memory. */
ddpc_vocab *ddpc__vocab_alloc(int64_t size);
/* Copies token s[0, len) with its count into entry id; DDPC_ENOMEM. */
ddpc_status ddpc__vocab_set(ddpc_vocab *v, int64_t id, const char *s, size_t len, int64_t count);
/* Builds the lookup table once every entry is set; DDPC_EFORMAT naming the first duplicate (with
 * `what` in front of the message), DDPC_ENOMEM. */
ddpc_status ddpc__vocab_index(ddpc_vocab *v, const char *what);

/* The next token of the line [*pos, end) of s under `tok`, after the line was trimmed: its bytes
 * in *t, *tn (a white-space run in CHAR mode is the token " "); false when none is left. */
bool ddpc__vocab_next_token(ddpc_tokenize tok, const char *s, size_t *pos, size_t end,
                            const char **t, size_t *tn);
/* Trims white space at both ends of s[0, n): the kept part is s[*b, *e). */
void ddpc__vocab_trim(const char *s, size_t n, size_t *b, size_t *e);

#endif
