#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""tensorboard-check.py — TensorBoard event files that tandem-train wrote, read from the
outside and checked against the run's --json lines.

    tensorboard-check.py LIVE_EVENTS CONVERTED_EVENTS RUN.jsonl

Each file is read record by record as TensorFlow's reader does: the 8-byte length and
its masked CRC-32C, the data and its masked CRC-32C (computed here, not trusted), each
record parsed as an Event by python3-protobuf from the message types declared below
(TensorBoard's field numbers). The first record must be file_version "brain.Event:2".
Then every scalar the run's JSON holds must be in LIVE with its float32 value at its
step: loss/accuracy/learning rate/epoch/samples per second of each step summary, the
epochs' train, validation and test figures, each device's compute, communication and
wait ms and memory, and each sampled step's overlap; CONVERTED (the same run from the
history) must hold the same values for every tag it has, and every tag but the ones
the history does not keep. Exits 77 without python3-protobuf; 1 on the first
difference, saying what differs.
"""
import json
import struct
import sys

try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError:
    print("skip: python3-protobuf is not installed")
    sys.exit(77)

import numpy as np


def crc32c(data):
    table = crc32c.table
    if table is None:
        table = crc32c.table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (0x82F63B78 ^ (c >> 1)) if c & 1 else c >> 1
            table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


crc32c.table = None


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    f = descriptor_pb2.FileDescriptorProto(name="tensorboard_check.proto", package="tbcheck")
    T = descriptor_pb2.FieldDescriptorProto
    summary = f.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.field.add(name="tag", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=T.TYPE_FLOAT, label=T.LABEL_OPTIONAL)
    summary.field.add(name="value", number=1, type=T.TYPE_MESSAGE, label=T.LABEL_REPEATED,
                      type_name=".tbcheck.Summary.Value")
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=T.TYPE_DOUBLE, label=T.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL,
                    type_name=".tbcheck.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    descriptor = pool.FindMessageTypeByName("tbcheck.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def fail(message):
    print("tensorboard-check: " + message)
    sys.exit(1)


def read_events(path):
    Event = event_class()
    data = open(path, "rb").read()
    at, events = 0, []
    while at < len(data):
        if len(data) - at < 12:
            fail(f"{path}: a record cut short at byte {at}")
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if masked(crc32c(header)) != length_crc:
            fail(f"{path}: the length's CRC-32C at byte {at} is wrong")
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if len(body) != length or masked(crc32c(body)) != body_crc:
            fail(f"{path}: the data's CRC-32C at byte {at} is wrong")
        event = Event()
        event.ParseFromString(body)
        events.append(event)
        at += 16 + length
    if not events or events[0].file_version != "brain.Event:2":
        fail(f"{path}: the first record is not file_version brain.Event:2")
    scalars = {}
    for e in events[1:]:
        for v in e.summary.value:
            scalars.setdefault(v.tag, {})[e.step] = v.simple_value
    return len(events), scalars


def expected(jsonl):
    """{tag: {step: float32 value}} from the run's --json lines."""
    want, labels = {}, []

    def put(tag, step, value):
        if value is not None and np.isfinite(value):
            want.setdefault(tag, {})[step] = float(np.float32(value))

    for line in open(jsonl):
        e = json.loads(line)
        kind = e.get("type")
        if kind == "started":
            labels = [f"{i} {d}" for i, d in enumerate(e["devices"])]
        elif kind == "step":
            s = e["step"]
            put("loss/train", s, e["train_loss"])
            put("accuracy/train", s, e["train_accuracy"])
            put("learning_rate", s, e["lr"])
            put("epoch", s, e["epoch_float"])
            put("samples_per_s", s, e["samples_per_second"])
        elif kind == "epoch":
            s = e["step"]
            put("loss/train_epoch", s, e["train_loss"])
            put("accuracy/train_epoch", s, e["train_accuracy"])
            put("loss/test", s, e["test_loss"])
            put("accuracy/test", s, e["test_accuracy"])
            put("loss/val", s, e.get("val_loss"))
            put("accuracy/val", s, e.get("val_accuracy"))
        elif kind == "devices":
            for label, d in zip(labels, e["devices"]):
                put("compute_ms/" + label, e["step"], d["compute_ms"])
                put("communication_ms/" + label, e["step"], d["comm_ms"])
                put("wait_ms/" + label, e["step"], d["wait_ms"])
                put("memory_bytes/" + label, e["step"], d["tandem_bytes"])
    return want


def main(argv):
    live_path, converted_path, jsonl = argv[1:4]
    n_live, live = read_events(live_path)
    n_conv, converted = read_events(converted_path)
    want = expected(jsonl)
    for tag in ("loss/train", "loss/val", "accuracy/val", "loss/test", "learning_rate",
                "memory_bytes/0 cpu", "compute_ms/1 cpu"):
        if tag not in want:
            fail(f"the run's JSON has no {tag}: the test's run is too short")
    compared = 0
    for tag, points in want.items():
        got = live.get(tag)
        if got is None:
            fail(f"{live_path}: no scalar {tag}")
        for step, value in points.items():
            if step not in got:
                fail(f"{live_path}: {tag} has no value at step {step}")
            if got[step] != value:
                fail(f"{live_path}: {tag} at step {step} is {got[step]!r}, the JSON's {value!r}")
            compared += 1
    overlap = [t for t in live if t.startswith("overlap_percent/")]
    if not overlap:
        fail(f"{live_path}: no overlap_percent scalars")
    for tag, points in converted.items():
        for step, value in points.items():
            if live.get(tag, {}).get(step) != value:
                fail(f"{converted_path}: {tag} at step {step} is {value!r}, live "
                     f"{live.get(tag, {}).get(step)!r}")
    missing = set(live) - set(converted) - {t for t in live if t.startswith(
        ("memory_used_bytes/", "load_percent/"))}
    if missing:
        fail(f"{converted_path}: tags the live file has: {sorted(missing)}")
    print(f"{n_live} records live, {n_conv} converted; {compared} values equal the JSON's; "
          f"{len(converted)} tags converted alike")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
