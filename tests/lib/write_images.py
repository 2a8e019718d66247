# SPDX-License-Identifier: MIT
"""Test data for tests/cli_train_imagefolder.sh, written with numpy, zlib and struct only (no PIL):
PNG files by hand (grey, RGB, RGBA, 16-bit, palette; one IDAT, filter 0), and the same samples as
.npy arrays in the order an image folder reads them (class folders by name, then file names).
usage: write_images.py OUT_DIR [FMNIST_DIR]"""
import gzip
import os
import struct
import sys
import zlib

import numpy as np


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(arr, ctype, depth=8, palette=None):
    """arr (h, w[, c]) of the PNG's samples: uint8, or uint16 when depth is 16."""
    h, w = arr.shape[:2]
    rows = arr.astype(">u2") if depth == 16 else arr.astype(np.uint8)
    raw = b"".join(b"\x00" + rows[y].tobytes() for y in range(h))
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0))
    if palette is not None:
        out += chunk(b"PLTE", palette.astype(np.uint8).tobytes())
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def luma(rgb):
    """Pillow's convert('L'): ITU-R 601-2 in 16-bit fixed point. rgb (..., 3) -> (...)."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    return ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)


def resize(plane, oh, ow):
    """ddpc's bilinear resize (docs/data.md), half-pixel centres, in float64, rounded."""
    h, w = plane.shape
    p = plane.astype(np.float64)
    out = np.zeros((oh, ow), np.uint8)
    for oy in range(oh):
        sy = max((oy + 0.5) * (h / oh) - 0.5, 0.0)
        y0 = min(int(sy), h - 1)
        y1 = y0 + (y0 < h - 1)
        fy = sy - y0
        for ox in range(ow):
            sx = max((ox + 0.5) * (w / ow) - 0.5, 0.0)
            x0 = min(int(sx), w - 1)
            x1 = x0 + (x0 < w - 1)
            fx = sx - x0
            top = (1 - fx) * p[y0, x0] + fx * p[y0, x1]
            bottom = (1 - fx) * p[y1, x0] + fx * p[y1, x1]
            v = np.floor((1 - fy) * top + fy * bottom + 0.5)
            out[oy, ox] = min(max(v, 0), 255)
    return out


CLASSES = ["airplane", "bird", "cat", "deer"]  # already sorted: label = position


def rgb_split(out, name, n, rng):
    """n RGB 32x32 images, class = the brightest quadrant; a few stored in other PNG forms that
    decode to the same pixels. Writes OUT/name/<class>/<i>.png and OUT/name_{x,grey,small,y}.npy."""
    y = np.sort(rng.integers(0, 4, size=n))  # sorted: file order is sample order
    x = rng.integers(0, 120, size=(n, 32, 32, 3)).astype(np.uint8)
    for i, c in enumerate(y):
        r, q = divmod(int(c), 2)
        x[i, 16 * r:16 * r + 16, 16 * q:16 * q + 16, :] += 100
    for i in range(n):
        path = f"{out}/{name}/{CLASSES[y[i]]}/{i:04d}.png"
        if i == 0:  # 16-bit RGB: the decoder keeps the high byte
            data = png_bytes(x[i].astype(np.uint16) * 257 + 3, 2, depth=16)
        elif i == 1:  # RGBA: alpha dropped
            a = rng.integers(0, 256, size=(32, 32, 1)).astype(np.uint8)
            data = png_bytes(np.concatenate([x[i], a], axis=2), 6)
        elif i == 2:  # palette: the image redrawn with 256 of its colours
            pal = x[i].reshape(-1, 3)[:256].copy()
            idx = rng.integers(0, 256, size=(32, 32)).astype(np.uint8)
            x[i] = pal[idx]
            data = png_bytes(idx, 3, palette=pal)
        elif i == 3:  # grey in a colour folder: repeated into R, G and B
            x[i] = x[i][:, :, :1]
            data = png_bytes(x[i][:, :, 0], 0)
            path = path[:-4] + ".PNG"  # extensions in any case
        else:
            data = png_bytes(x[i], 2)
        write(path, data)
    np.save(f"{out}/{name}_x.npy", x.transpose(0, 3, 1, 2).copy())
    np.save(f"{out}/{name}_grey.npy", luma(x)[:, None])
    small = np.stack([np.stack([resize(x[i, :, :, ch], 20, 12) for ch in range(3)]) for i in range(n)])
    np.save(f"{out}/{name}_small.npy", small)
    np.save(f"{out}/{name}_y.npy", y.astype(np.int64))
    return x


def fmnist(out, src, n_train, n_test):
    """The first n of each Fashion-MNIST split, stably sorted by label (so that the IDX order is
    the folder's), as IDX files (OUT/fm) and as PNG folders (OUT/fmpng/{train,test}/<label>/)."""
    for split, n, tag in (("train", n_train, "train"), ("t10k", n_test, "test")):
        with gzip.open(f"{src}/{split}-images-idx3-ubyte.gz") as f:
            img = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)[:n]
        with gzip.open(f"{src}/{split}-labels-idx1-ubyte.gz") as f:
            lab = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
        order = np.argsort(lab, kind="stable")
        img, lab = img[order], lab[order]
        os.makedirs(f"{out}/fm", exist_ok=True)
        with gzip.open(f"{out}/fm/{split}-images-idx3-ubyte.gz", "wb") as f:
            f.write(struct.pack(">IIII", 0x803, n, 28, 28) + img.tobytes())
        with gzip.open(f"{out}/fm/{split}-labels-idx1-ubyte.gz", "wb") as f:
            f.write(struct.pack(">II", 0x801, n) + lab.tobytes())
        for i in range(n):
            write(f"{out}/fmpng/{tag}/{lab[i]}/{i:05d}.png", png_bytes(img[i], 0))


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(7)
    rgb_split(out, "train", 256, rng)
    rgb_split(out, "val", 64, rng)
    # The resize agrees with torch's bilinear interpolate (align_corners=False, no antialias) up
    # to the rounding of a value within 1e-6 of a half.
    try:
        import torch
        plane = rng.integers(0, 256, size=(32, 32)).astype(np.uint8)
        ours = resize(plane, 20, 12).astype(np.int64)
        t = torch.nn.functional.interpolate(torch.tensor(plane, dtype=torch.float64)[None, None],
                                            size=(20, 12), mode="bilinear", align_corners=False)
        theirs = torch.floor(t[0, 0] + 0.5).numpy().astype(np.int64)
        print("torch_resize_maxdiff", int(np.abs(ours - theirs).max()))
    except ImportError:
        print("torch_resize_maxdiff none")
    if len(sys.argv) > 2:
        fmnist(out, sys.argv[2], 2000, 500)


main()
