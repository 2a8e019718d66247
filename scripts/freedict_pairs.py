#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""English -> German word pairs from Debian's dict-freedict-eng-deu, for configs/translate_demo.yaml.

    scripts/freedict_pairs.py OUT_DIR [--dict PREFIX] [--max-len N]

Reads PREFIX.index and PREFIX.dict.dz (dictd format; PREFIX defaults to
/usr/share/dictd/freedict-eng-deu) and writes OUT_DIR/{train,valid,test}.{src,tgt}: line i of a .src
file is an English word, line i of the .tgt file its German translation. Standard library only.

Pairs, in the order of the index (alphabetical by headword):
  - source: the entry's headword (its first line up to the pronunciation " /.../"), kept only when
    it is one lower-case English word of letters a-z, at most --max-len (20) letters;
  - target: the first translation of the entry's first translation line: the line is split at the
    commas outside brackets, annotations (<masc>, <pl>, [bot.], {...}) are dropped and spaces
    collapsed; kept only when it is one word of letters (A-Z, a-z, ä ö ü Ä Ö Ü ß), at most --max-len;
  - one pair per source word: the first entry that passes wins (a word's first sense).
Split, fixed by the word itself (so a source never appears in two splits, and adding entries to the
dictionary moves no word between splits): CRC-32 of the UTF-8 source modulo 100 is 0 for test,
1 for valid, anything else for train; within a split the pairs keep the index order.

The result is character-level material: many targets are cognates ("malachite" -> "Malachit"),
inflections ("snowed" -> "geschneit") or compounds, so a small model learns spelling rules and
common stems; held-out words are never seen in training.
"""
import argparse
import gzip
import os
import re
import sys
import zlib

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
SRC_RE = re.compile(r"[a-z]+")
TGT_RE = re.compile(r"[A-Za-zäöüÄÖÜß]+")
NOTE_RE = re.compile(r"<[^>]*>|\[[^\]]*\]|\{[^}]*\}")


def b64(s):
    """dictd's base-64 numbers (offsets and lengths in the .index file)."""
    v = 0
    for c in s:
        v = v * 64 + B64.index(c)
    return v


def split_top(line):
    """Splits at commas outside (), [], <> and {}."""
    out, depth, cur = [], 0, []
    for ch in line:
        if ch in "([<{":
            depth += 1
        elif ch in ")]>}":
            depth = max(depth - 1, 0)
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def entry_pair(text, max_len):
    """(source, target) of one dictd entry, or None when it does not pass the filters."""
    lines = text.split("\n")
    if len(lines) < 2 or not lines[1] or lines[1].startswith(" "):
        return None
    src = lines[0].split(" /")[0].split(" <")[0].strip()
    tgt = " ".join(NOTE_RE.sub("", split_top(lines[1])[0]).split())
    if not (SRC_RE.fullmatch(src) and TGT_RE.fullmatch(tgt)):
        return None
    if len(src) > max_len or len(tgt) > max_len:
        return None
    return src, tgt


def split_of(src):
    h = zlib.crc32(src.encode("utf-8")) % 100
    return "test" if h == 0 else "valid" if h == 1 else "train"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--dict", default="/usr/share/dictd/freedict-eng-deu",
                    help="dictd prefix: PREFIX.index and PREFIX.dict.dz")
    ap.add_argument("--max-len", type=int, default=20, help="longest word kept, in characters")
    a = ap.parse_args()
    try:
        with gzip.open(a.dict + ".dict.dz") as f:
            data = f.read()
        with open(a.dict + ".index", encoding="utf-8") as f:
            index = [line.rstrip("\n").split("\t") for line in f]
    except OSError as e:
        sys.exit("freedict_pairs: %s (install the Debian package dict-freedict-eng-deu)" % e)
    seen_src, seen_entry = set(), set()
    splits = {"train": [], "valid": [], "test": []}
    for row in index:
        if len(row) != 3 or row[0].startswith("00database"):
            continue
        key = (row[1], row[2])
        if key in seen_entry:  # one entry listed under several index keys
            continue
        seen_entry.add(key)
        off, length = b64(row[1]), b64(row[2])
        pair = entry_pair(data[off:off + length].decode("utf-8", "replace"), a.max_len)
        if pair is None or pair[0] in seen_src:
            continue
        seen_src.add(pair[0])
        splits[split_of(pair[0])].append(pair)
    os.makedirs(a.out_dir, exist_ok=True)
    for name, pairs in splits.items():
        for side, col in (("src", 0), ("tgt", 1)):
            path = os.path.join(a.out_dir, "%s.%s" % (name, side))
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(p[col] + "\n" for p in pairs)
    print("freedict_pairs: %d train, %d valid, %d test pairs in %s" %
          (len(splits["train"]), len(splits["valid"]), len(splits["test"]), a.out_dir))


if __name__ == "__main__":
    main()
