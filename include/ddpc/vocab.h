// SPDX-License-Identifier: MIT
/* ddpc vocabularies for sequence-to-sequence data: a table of token strings <-> ids built from a
 * text file, or loaded from the file it was saved to. Ids 0..3 are the special tokens <pad>, <bos>,
 * <eos>, <unk> in every vocabulary; real tokens follow from id 4, most frequent first (ties in
 * byte order of the token), so the same corpus and settings always give the same ids. A vocabulary
 * never changes after it is made: any number of threads may read it at once. */
#ifndef DDPC_VOCAB_H
#define DDPC_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_TOK_PAD 0
#define DDPC_TOK_BOS 1
#define DDPC_TOK_EOS 2
#define DDPC_TOK_UNK 3
#define DDPC_VOCAB_SPECIALS 4

/* How a line becomes tokens. Both first strip the line's leading and trailing white space.
 * WORD: the runs of non-white-space bytes. CHAR: every UTF-8 character, white-space runs counting
 * as one " " token (a byte that starts no valid UTF-8 character is a token of its own). */
typedef enum { DDPC_TOKENIZE_WORD, DDPC_TOKENIZE_CHAR } ddpc_tokenize;

/* "word" or "char". */
const char *ddpc_tokenize_name(ddpc_tokenize t);

typedef struct ddpc_vocab ddpc_vocab;

/* Builds the vocabulary of the text file `path` (every line): the tokens seen at least min_freq
 * (>= 1) times, after the specials. max_size > 0 caps the whole table (specials included) by
 * keeping the most frequent; 0 = no cap. DDPC_EIO if the file cannot be read, DDPC_EINVAL for
 * min_freq < 1 or max_size in [1, 4], DDPC_ENOMEM. */
ddpc_status ddpc_vocab_build(ddpc_vocab **out, const char *path, ddpc_tokenize tok,
                             int64_t min_freq, int64_t max_size);
/* Writes the vocabulary to `path` (replacing it through a temporary file and rename): a header
 * line "# ddpc vocab v1 tokenize=<word|char> min_freq=<n> size=<n>", then one line per id,
 * "<token>\t<count>", specials first (count 0). DDPC_EIO names the path. */
ddpc_status ddpc_vocab_save(const ddpc_vocab *v, const char *path);
/* Reads a file written by ddpc_vocab_save. DDPC_EIO if it cannot be read; DDPC_EFORMAT naming the
 * path and line for a bad header, missing or misplaced specials, a duplicate token, a line without
 * its count, or a size that disagrees with the header. */
ddpc_status ddpc_vocab_load(ddpc_vocab **out, const char *path);
/* Frees the vocabulary; NULL is a no-op. */
void ddpc_vocab_destroy(ddpc_vocab *v);

/* Entries, specials included. */
int64_t ddpc_vocab_size(const ddpc_vocab *v);
ddpc_tokenize ddpc_vocab_tokenize(const ddpc_vocab *v);
int64_t ddpc_vocab_min_freq(const ddpc_vocab *v);
/* Whether a and b have the same tokenization, min_freq and token table (counts are not compared).
 */
bool ddpc_vocab_equal(const ddpc_vocab *a, const ddpc_vocab *b);
/* CRC-32 (zlib's) of the token table: every token's bytes in id order, each followed by a NUL
 * byte. What ids mean, so weights record it: equal tables give equal digests; counts, min_freq
 * and the tokenization are not part of it. */
uint32_t ddpc_vocab_digest(const ddpc_vocab *v);
/* The token of id (NUL-terminated, owned by the vocabulary), or NULL outside [0, size). */
const char *ddpc_vocab_token(const ddpc_vocab *v, int32_t id);
/* The id of the token s[0, len), or DDPC_TOK_UNK when it is not in the table. */
int32_t ddpc_vocab_id(const ddpc_vocab *v, const char *s, size_t len);

/* Tokenizes `line` (up to its NUL or first newline) and writes the ids of at most cap tokens to
 * ids (cap); *n = the number of tokens the line has, which may exceed cap (then only cap were
 * written). Unknown tokens become DDPC_TOK_UNK. No special token is added. */
void ddpc_vocab_encode(const ddpc_vocab *v, const char *line, int32_t *ids, int64_t cap,
                       int64_t *n);
/* Writes ids[0, n) as text into buf (cap bytes, always NUL-terminated when cap > 0), stopping at
 * the first <pad> or <eos>; <bos> is skipped, <unk> written as "<unk>"; words are joined by one
 * space, characters by nothing. Returns the length the whole text needs (excluding the NUL), as
 * snprintf does, so a result >= cap means it was cut. */
size_t ddpc_vocab_decode(const ddpc_vocab *v, const int32_t *ids, int64_t n, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
