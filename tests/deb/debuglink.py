# SPDX-License-Identifier: MIT
"""debuglink.py BINARY DEBUGFILE: exits 0 when BINARY's .gnu_debuglink section names DEBUGFILE
(its base name) with DEBUGFILE's CRC-32, which is what gdb checks before it uses a debug file
found by that link (GDB manual, "Debugging Information in Separate Files"); else prints why and
exits 1. The section: the file name, a NUL, padding to 4 bytes, then the CRC (little-endian)."""
import os
import subprocess
import sys
import tempfile
import zlib

binary, debug = sys.argv[1], sys.argv[2]
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "link")
    r = subprocess.run(["objcopy", "--dump-section", ".gnu_debuglink=" + out, binary, tmp + "/x"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{binary}: no .gnu_debuglink section ({r.stderr.strip()})")
    data = open(out, "rb").read()
name = data[: data.index(b"\0")].decode()
crc = int.from_bytes(data[-4:], "little")
with open(debug, "rb") as f:
    want = zlib.crc32(f.read()) & 0xFFFFFFFF
if name != os.path.basename(debug):
    sys.exit(f"{binary}: .gnu_debuglink names {name}, not {os.path.basename(debug)}")
if crc != want:
    sys.exit(f"{binary}: .gnu_debuglink's CRC {crc:08x} is not {debug}'s {want:08x}")
