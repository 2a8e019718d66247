// SPDX-License-Identifier: MIT
/* ddpc datasets: an immutable, in-memory collection of samples addressed by index.
 * Three kinds: images (c, h, w) fp32 pixels with a class label, token windows (block_size
 * inputs, block_size next-token targets), and translation pairs (a source and a target sequence
 * of ids, each of its own length). A dataset never changes after _create, so every query
 * and ddpc_dataset_get_batch may run from any number of threads at once. */
#ifndef DDPC_DATA_H
#define DDPC_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ddpc/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ddpc_dataset ddpc_dataset;
typedef enum { DDPC_DATASET_IMAGES, DDPC_DATASET_TOKENS, DDPC_DATASET_PAIRS } ddpc_dataset_kind;
typedef struct ddpc_vocab ddpc_vocab; /* ddpc/vocab.h */

/* Fashion-MNIST mean and std of the train set's pixels in [0, 1], used to normalise both splits. */
#define DDPC_FMNIST_MEAN 0.2860f
#define DDPC_FMNIST_STD 0.3530f

/* Fashion-MNIST from `dir` holding {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz (train=false
 * reads t10k). Pixels become (p/255 - DDPC_FMNIST_MEAN) / DDPC_FMNIST_STD; 10 classes, (1, 28, 28).
 * Errors name the full file path: a missing file is DDPC_EIO; wrong magic, dims, an image/label
 * count mismatch, a label > 9, truncated or corrupt gzip data are DDPC_EFORMAT. */
ddpc_status ddpc_dataset_fmnist_create(ddpc_dataset **out, const char *dir, bool train);

/* Byte-level text from a file, or from a directory's regular files (sorted by name, skipping *.dat
 * and symlinks and subdirectories), concatenated. The first floor(len * (1 - val_fraction)) bytes
 * are the train split, the rest the held-out split (train=false). Sample i is the window of
 * block_size+1 bytes starting at i*block_size: tokens = bytes[s, s+T), targets = bytes[s+1, s+T+1).
 * Vocabulary 256. DDPC_EIO if the path is missing or unreadable; DDPC_EINVAL if it holds no bytes,
 * val_fraction is outside [0, 1), block_size < 1 or the split has fewer than block_size+1 bytes. */
ddpc_status ddpc_dataset_text_create(ddpc_dataset **out, const char *path, int64_t block_size,
                                     double val_fraction, bool train);

/* Samples and class labels from two NumPy .npy files (numpy.save's format, versions 1.0-3.0): x
 * of shape (N, D), (N, H, W) or (N, C, H, W) and dtype float32, float64, uint8 (scaled to [0, 1],
 * as torchvision's ToTensor), int32 or int64; y of shape (N,) and an integer dtype, labels in
 * [0, 255]. Little-endian, C order. Samples have shape (1, 1, D), (1, H, W) or (C, H, W); classes
 * = the largest label + 1 (at least 2). Errors name the file: DDPC_EIO (cannot be read),
 * DDPC_EFORMAT (not .npy, a dtype or order not read, a size that disagrees with the header, a
 * shape that is not samples, labels of another length or out of range). */
ddpc_status ddpc_dataset_npy_create(ddpc_dataset **out, const char *x_path, const char *y_path);

/* What a CSV file's target columns hold: one integer class label per row (cross-entropy), real
 * values (regression: mse, l1, smooth_l1) or values in [0, 1] (bce_logits: multi-label 0/1, or
 * probabilities). */
typedef enum { DDPC_CSV_CLASSES, DDPC_CSV_VALUES, DDPC_CSV_PROBABILITIES } ddpc_csv_targets;

/* Tabular samples from a CSV file (RFC 4180: a header row, fields separated by commas, optionally
 * in double quotes with "" for a quote; LF or CRLF line ends; blank lines skipped). `label` names
 * the target columns, comma-separated ("y" or "y1,y2"; DDPC_CSV_CLASSES takes one); every other
 * column is a feature, in file order, and must hold a finite decimal number. A sample has shape
 * (1, 1, features). Classes: labels are whole numbers in [0, 255], classes = the largest + 1 (at
 * least 2); values and probabilities: float targets of width = the label columns
 * (ddpc_dataset_target_width), num_classes = that width. Features are used as they are (no
 * standardisation). Errors name the file and line (and the column): DDPC_EIO (cannot be read),
 * DDPC_EFORMAT (an empty file or a header without rows, a label column the header lacks, a row with
 * another number of fields than the header, a cell that is not a number, a label that is not a
 * class, a probability outside [0, 1], a bad quote), DDPC_EINVAL (no label named, no feature
 * column left, several labels for classes). */
ddpc_status ddpc_dataset_csv_create(ddpc_dataset **out, const char *path, const char *label,
                                    ddpc_csv_targets targets);
/* How ddpc_dataset_imagefolder_create decodes a folder. */
typedef struct {
    int64_t height, width; /* both > 0: resize every image to it; both 0: keep the images' size */
    int channels;          /* 1 (grey) or 3 (RGB); 0: 3 if any image is colour, else 1 */
    /* Normalize per channel after ToTensor's /255: (p/255 - mean) / std. A count of 0 means
     * mean 0 (std 1); 1 applies to every channel; else one per channel. */
    size_t n_mean, n_std;
    float mean[3], std[3];
    int threads; /* decoding threads; 0: OpenMP's default */
} ddpc_imagefolder_config;

/* No resize, channels from the images, no normalisation, OpenMP's threads. */
ddpc_imagefolder_config ddpc_imagefolder_config_default(void);

/* What a folder held besides its images, for the run's log. */
typedef struct {
    int64_t skipped; /* entries of the class folders that are not .png/.jpg/.jpeg files */
    int64_t bytes;   /* the decoded pixels kept in memory (n, c, h, w) u8 */
} ddpc_imagefolder_info;

/* Images and labels as torchvision's ImageFolder finds them: every visible sub-folder of `root`
 * is a class, classes sorted by name (label = position), samples sorted by (class, file name);
 * the files of a class folder whose names end in .png, .jpg or .jpeg (any case) are its images,
 * hidden entries are ignored and other entries counted in info->skipped. Decoded once (PNG with
 * libpng, JPEG with libjpeg-turbo, in parallel) into u8 (c, h, w), converted to cfg's channels,
 * resized (ddpc docs/data.md: bilinear, half-pixel centres) and normalised on copy. `like`, when
 * not NULL, is the train split this one is held out from: its class names must be the same and
 * its channels and size are used. info may be NULL. DDPC_EIO: root cannot be read; DDPC_EFORMAT
 * naming the file or folder: no class folder, a class folder without images, over 256 classes,
 * a file that does not decode (corrupt, truncated), mixed sizes without a resize (two files
 * named), a class set unlike `like`'s; DDPC_EINVAL: a bad cfg. */
ddpc_status ddpc_dataset_imagefolder_create(ddpc_dataset **out, const char *root,
                                            const ddpc_imagefolder_config *cfg,
                                            const ddpc_dataset *like, ddpc_imagefolder_info *info);

/* The name of class k of an image folder dataset (its folder), owned by the dataset; NULL for
 * other datasets or k outside [0, classes). */
const char *ddpc_dataset_class_name(const ddpc_dataset *d, int64_t k);

/* Token shards as llm.c and nanoGPT write them, for GPT training on real tokenised corpora.
 * `pattern` is a glob(3) pattern (or one path); the matching files, sorted by name, are
 * concatenated into one token stream, windowed as for text. Formats:
 * DDPC_TOKEN_FILE_LLMC: llm.c's header of 256 little-endian int32 (magic 20240520, version 1 for
 * uint16 tokens or 2 for uint32, token count), then the tokens; DDPC_TOKEN_FILE_U16: raw
 * little-endian uint16 tokens (nanoGPT's train.bin). The files are mapped read-only, not copied.
 * Every id is checked against vocab_size (2 <= vocab_size <= 2^31-1) at creation.
 * DDPC_EIO: no file matches or one cannot be read; DDPC_EFORMAT naming the file: a wrong magic or
 * version, a size that disagrees with the header (truncated or trailing bytes), an odd-sized raw
 * file, or an id >= vocab_size (with its position); DDPC_EINVAL: fewer than block_size+1 tokens. */
typedef enum { DDPC_TOKEN_FILE_LLMC, DDPC_TOKEN_FILE_U16 } ddpc_token_file_format;
ddpc_status ddpc_dataset_token_shards_create(ddpc_dataset **out, const char *pattern,
                                             ddpc_token_file_format format, int64_t block_size,
                                             int64_t vocab_size);

/* Synthetic images for tests: n samples of (c, h, w) standard-normal pixels; labels are the argmax
 * of a random linear map of the pixels drawn from `seed` alone, so they are learnable and both
 * splits share it. train=false draws the held-out split's pixels from a separate stream, so the
 * two splits' samples differ while one rule labels both. 2 <= classes <= 256. The same arguments
 * always give the same dataset. */
ddpc_status ddpc_dataset_synthetic_images_create(ddpc_dataset **out, int64_t n, int64_t c,
                                                 int64_t h, int64_t w, int64_t classes,
                                                 uint64_t seed, bool train);

/* Synthetic tokens for tests: a stream of n_tokens over [0, vocab) following
 * next = (prev * a + b) % vocab, with (a, b) drawn from `seed` alone (shared by both splits),
 * except that 10% of positions are uniform noise; the start and the noise come from a stream of
 * the split's own (train=false for the held-out one). Windows as for text.
 * 2 <= vocab <= 2^31-1; n_tokens >= block_size + 1. */
ddpc_status ddpc_dataset_synthetic_tokens_create(ddpc_dataset **out, int64_t n_tokens,
                                                 int64_t vocab, int64_t block_size, uint64_t seed,
                                                 bool train);

/* Translation pairs from two line-aligned text files: line i of src_path is the source of sample
 * i, line i of tgt_path its target, each encoded with its vocabulary (borrowed: the vocabularies
 * must outlive the dataset). A sample's source is its ids followed by <eos>; its target y gives
 * the decoder input <bos> y and the targets y <eos> (ddpc/vocab.h's special ids). Both must fit
 * in max_len positions (source ids + 1 and target ids + 1 <= max_len): a longer pair is dropped
 * when drop_long is set (*dropped counts them; may be NULL), else it is DDPC_EINVAL naming the
 * file and line. DDPC_EIO for an unreadable file; DDPC_EFORMAT when the files' line counts differ;
 * DDPC_EINVAL when no pair is left or max_len < 2. Vocabulary size = the target vocabulary's;
 * shape = (longest source, longest target + 1, 1) over the samples. */
ddpc_status ddpc_dataset_translation_create(ddpc_dataset **out, const char *src_path,
                                            const char *tgt_path, const ddpc_vocab *src_vocab,
                                            const ddpc_vocab *tgt_vocab, int64_t max_len,
                                            bool drop_long, int64_t *dropped);

/* An images dataset with base's pixels (borrowed: base must outlive it) and derived labels
 * label = map[base label], for a coarser task over the same samples (Fashion-MNIST's 10 classes
 * into 4 groups, say). map has one entry per base class (map_len = base's classes), each in
 * [0, 255]; the view has max(map) + 1 classes, at least 2. DDPC_EINVAL names the mismatch. */
ddpc_status ddpc_dataset_relabel_create(ddpc_dataset **out, const ddpc_dataset *base,
                                        const int64_t *map, int64_t map_len);

/* Frees the dataset; NULL is a no-op. */
void ddpc_dataset_destroy(ddpc_dataset *d);

ddpc_dataset_kind ddpc_dataset_kind_of(const ddpc_dataset *d);
/* Number of samples. */
int64_t ddpc_dataset_size(const ddpc_dataset *d);
/* Number of classes for images, vocabulary size for tokens, target vocabulary size for pairs. */
int64_t ddpc_dataset_num_classes(const ddpc_dataset *d);
/* images: shape = (c, h, w); tokens: shape = (block_size, 1, 1); pairs: (longest source, longest
 * target + 1, 1), the widths a batch is padded to at most. */
void ddpc_dataset_sample_shape(const ddpc_dataset *d, int64_t shape[3]);

/* Copies samples idx[0..n) into the caller's buffers. images: x (n, c, h, w), targets (n);
 * tokens: tokens (n, T), targets (n, T); pairs: DDPC_EINVAL (use ddpc_dataset_get_pairs). Pointers a kind does not use, and any the caller does not
 * want, may be NULL. An index outside [0, size) or n < 0 is DDPC_EINVAL, checked before anything
 * is written. Thread safe (read-only). */
ddpc_status ddpc_dataset_get_batch(const ddpc_dataset *d, const int64_t *idx, int64_t n, float *x,
                                   int32_t *tokens, int32_t *targets);

/* Pairs: *src_len, *tgt_len = the longest source and decoder length (target + 1) among samples
 * idx[0..n) (0 when n = 0): the narrowest widths ddpc_dataset_get_pairs accepts for them.
 * DDPC_EINVAL for an index outside [0, size) or a dataset of another kind. Thread safe. */
ddpc_status ddpc_dataset_pair_lengths(const ddpc_dataset *d, const int64_t *idx, int64_t n,
                                      int64_t *src_len, int64_t *tgt_len);
/* Pairs: copies samples idx[0..n) padded with 0 (<pad>): src (n, src_len) = source ids <eos>,
 * tokens (n, tgt_len) = <bos> y, targets (n, tgt_len) = y <eos>. Any output may be NULL.
 * DDPC_EINVAL (before anything is written) for an index outside [0, size), another kind, or
 * widths narrower than ddpc_dataset_pair_lengths's. Thread safe (read-only). */
ddpc_status ddpc_dataset_get_pairs(const ddpc_dataset *d, const int64_t *idx, int64_t n,
                                   int64_t src_len, int64_t tgt_len, int32_t *src, int32_t *tokens,
                                   int32_t *targets);

/* Pairs: sample i's ids without padding, owned by the dataset: *src (*src_len) = source ids and
 * <eos>, *tgt (*tgt_len) = target ids without <bos> or <eos>. DDPC_EINVAL for i outside [0, size)
 * or another kind. Thread safe. */
ddpc_status ddpc_dataset_pair(const ddpc_dataset *d, int64_t i, const int32_t **src,
                              int64_t *src_len, const int32_t **tgt, int64_t *tgt_len);

/* Width K of each sample's float targets (a CSV's regression or multi-label columns), or 0 when
 * its targets are class labels or tokens. */
int64_t ddpc_dataset_target_width(const ddpc_dataset *d);
/* Copies the float targets of samples idx[0..n) into y (n, K). DDPC_EINVAL (before anything is
 * written) for a dataset without float targets or an index outside [0, size). Thread safe. A
 * dataset with float targets writes no int32 targets in ddpc_dataset_get_batch. */
ddpc_status ddpc_dataset_get_float_targets(const ddpc_dataset *d, const int64_t *idx, int64_t n,
                                           float *y);

/* Raw labels (size) of an images dataset, owned by the dataset (e.g. to derive a coarse label);
 * NULL for tokens. */
const uint8_t *ddpc_dataset_labels(const ddpc_dataset *d);

#ifdef __cplusplus
}
#endif
#endif
