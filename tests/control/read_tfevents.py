#!/usr/bin/env python3
"""Reads a TensorBoard event file, written from the formats' descriptions
alone (not from RLX's writer): TFRecord framing (uint64 length, masked
CRC-32C of it, the record, masked CRC-32C of the record; little-endian;
mask = ((crc >> 15) | (crc << 17)) + 0xa282ead8) and the protobuf wire
format of TensorFlow's Event (wall_time = 1 double, step = 2 varint,
file_version = 3 string, summary = 5 message) and Summary (value = 1:
tag = 1 string, simple_value = 2 float).

Prints one line per event: "version <text>" or "step <n> <tag>=<value> ...".
Exits 1 with the reason on the first frame that does not check out."""
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def fields(buf):
    """(field number, wire type, value) for each field of a message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            size, i = varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        yield number, wire, value


def main(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        if len(data) - at < 12:
            sys.exit("a truncated frame header at byte %d" % at)
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if header_crc != masked(header):
            sys.exit("the length's CRC does not match at byte %d" % at)
        record = data[at + 12:at + 12 + length]
        (record_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if len(record) != length or record_crc != masked(record):
            sys.exit("the record's CRC does not match at byte %d" % at)
        at += 16 + length
        step, version, scalars = 0, None, []
        for number, wire, value in fields(record):
            if number == 2 and wire == 0:
                step = value
            elif number == 3 and wire == 2:
                version = value.decode()
            elif number == 5 and wire == 2:
                for n, w, v in fields(value):
                    if n != 1 or w != 2:
                        continue
                    tag, simple = None, None
                    for n2, w2, v2 in fields(v):
                        if n2 == 1 and w2 == 2:
                            tag = v2.decode()
                        elif n2 == 2 and w2 == 5:
                            (simple,) = struct.unpack("<f", v2)
                    scalars.append("%s=%r" % (tag, simple))
        if version is not None:
            print("version", version)
        else:
            print("step", step, " ".join(scalars))


if __name__ == "__main__":
    main(sys.argv[1])
