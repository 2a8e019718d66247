#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""png_ink.py FILE: prints "W H INK COLOUR RIGHT" for an 8-bit non-interlaced PNG (what
Chromium's --screenshot writes): INK counts pixels darker than light grey, COLOUR those whose
channels differ by more than 60 (chart lines, bars, legends: never the page's greys), RIGHT the
COLOUR pixels in the rightmost quarter of the width (a page that leaves it empty wastes it). Only
the standard library (zlib, struct), so the test needs no PIL."""
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or interlace or ctype not in (0, 2, 4, 6):
        sys.exit(f"{path}: unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
    bpp = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def main():
    w, h, bpp, rows = pixels(sys.argv[1])
    ink = colour = right = 0
    for line in rows:
        for x in range(0, w * bpp, bpp):
            px = line[x:x + 3] if bpp >= 3 else line[x:x + 1] * 3
            if min(px) < 200:
                ink += 1
            if max(px) - min(px) > 60:
                colour += 1
                if x >= (3 * w // 4) * bpp:
                    right += 1
    print(w, h, ink, colour, right)


main()
