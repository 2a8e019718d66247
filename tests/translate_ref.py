#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Reference figures for tests/cli_translate.sh, computed from the text files alone (no ddpc code):

    translate_ref.py bleu HYP REF VOCAB     -> "BLEU EXACT_COUNT LINES"
    translate_ref.py most_frequent TRAIN_SRC TRAIN_TGT SRC OUT
        writes OUT: for each line of SRC the target seen most often with it in TRAIN (ties: the
        target first seen earliest), else the most frequent train target overall.
    translate_ref.py split DIR              -> checks the documented CRC-32 split of every file

BLEU: corpus BLEU-4 over characters (a white-space run is one " " token) with sacrebleu's
statistics and 'exp' smoothing (see tests/golden/make_bleu_golden.py); a hypothesis character that
is not in the target vocabulary VOCAB (a vocab.tgt.txt), or the text "<unk>", matches nothing, and
so does a reference character missing from VOCAB, as in ddpc.
"""
import collections
import math
import re
import sys
import zlib

sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "golden"))
from make_bleu_golden import compute_bleu, stats  # noqa: E402


def chars(line, known, unknown):
    toks = []
    text = re.sub(r"\s+", " ", line.strip())
    i = 0
    while i < len(text):
        if text.startswith("<unk>", i):
            toks.append(next(unknown))
            i += 5
            continue
        c = text[i]
        toks.append(c if c in known else next(unknown))
        i += 1
    return toks


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def bleu(hyp_path, ref_path, vocab_path):
    known = {line.rsplit("\t", 1)[0] for line in read(vocab_path)[5:]}
    unknown = iter(range(10**9))
    uniq = (("unk", k) for k in unknown)
    hyps = [chars(h, known, uniq) for h in read(hyp_path)]
    refs = [chars(r, known, uniq) for r in read(ref_path)]
    assert len(hyps) == len(refs), (len(hyps), len(refs))
    c, t, sl, rl = stats(hyps, refs)
    exact = sum(h == r for h, r in zip(hyps, refs))
    print("%.6f %d %d" % (compute_bleu(c, t, sl, rl), exact, len(hyps)))


def most_frequent(train_src, train_tgt, src, out):
    by_src = collections.defaultdict(collections.Counter)
    first = {}
    overall = collections.Counter()
    for i, (s, t) in enumerate(zip(read(train_src), read(train_tgt))):
        by_src[s][t] += 1
        overall[t] += 1
        first.setdefault(t, i)

    def best(counter):
        return min(counter, key=lambda t: (-counter[t], first[t]))
    default = best(overall)
    with open(out, "w", encoding="utf-8") as f:
        for s in read(src):
            f.write((best(by_src[s]) if s in by_src else default) + "\n")


def split(d):
    for name, want in (("train", None), ("valid", 1), ("test", 0)):
        for w in read("%s/%s.src" % (d, name)):
            h = zlib.crc32(w.encode("utf-8")) % 100
            assert (h > 1) if want is None else (h == want), (name, w, h)
    print("split ok")


if __name__ == "__main__":
    {"bleu": bleu, "most_frequent": most_frequent, "split": split}[sys.argv[1]](*sys.argv[2:])
