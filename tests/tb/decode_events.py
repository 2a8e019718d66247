#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Decodes TensorBoard event files independently of ddpc: TFRecord framing read here, both CRCs
checked with crcmod's CRC-32C, events parsed by protoc-generated classes of tb_event.proto.
usage: decode_events.py PB2_DIR FILE...   (PB2_DIR holds tb_event_pb2.py from protoc)
Prints one JSON object per event: {"file", "step", "version" | "start" | "scalars": {tag: value}},
and, for a file that ends inside a record, {"file", "torn": bytes left}. Exits 1 on a bad CRC."""
import json
import struct
import sys

import crcmod.predefined

sys.path.insert(0, sys.argv[1])
import tb_event_pb2  # noqa: E402

crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        if len(data) - at < 12:
            yield None, len(data) - at
            return
        (length,) = struct.unpack_from("<Q", data, at)
        (len_crc,) = struct.unpack_from("<I", data, at + 8)
        if masked(data[at : at + 8]) != len_crc:
            sys.exit(f"{path}: bad length CRC at byte {at}")
        if len(data) - at < 12 + length + 4:
            yield None, len(data) - at
            return
        body = data[at + 12 : at + 12 + length]
        (body_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        if masked(body) != body_crc:
            sys.exit(f"{path}: bad data CRC at byte {at}")
        yield body, 0
        at += 12 + length + 4


def main():
    for path in sys.argv[2:]:
        for body, torn in records(path):
            if body is None:
                print(json.dumps({"file": path, "torn": torn}))
                break
            ev = tb_event_pb2.Event()
            ev.ParseFromString(body)
            out = {"file": path, "step": ev.step, "wall_time": ev.wall_time}
            kind = ev.WhichOneof("what")
            if kind == "file_version":
                out["version"] = ev.file_version
            elif kind == "session_log":
                out["start"] = ev.session_log.status == tb_event_pb2.SessionLog.START
            elif kind == "summary":
                out["scalars"] = {v.tag: v.simple_value for v in ev.summary.value}
            print(json.dumps(out))


main()
