#!/usr/bin/env python3
"""Writes tests/golden/tensorboard_events.json: TensorBoard's own serialization of the events that
src/tensorboard/summary.h encodes, for tests/unit/test_tensorboard_events.cpp to compare byte for byte.

Each event is built with TensorBoard's classes and its plugins' own metadata functions (the HParams
plugin's metadata.create_summary_metadata and NULL_TENSOR, as its summary_v2 writer uses them; the
text plugin's create_summary_metadata), then serialized deterministically (map entries sorted by key, as our encoder is given them). The
inputs are written next to the bytes, so the C++ test rebuilds the same events from the file.

Usage (from the repository root):
  ~/.cache/roformer/venv-torch-2.11.0/bin/python tests/golden/make_tensorboard_golden.py
"""
import json
import os

# The pure-Python protobuf runtime: its deterministic serialization sorts map entries by key (upb's
# keeps hash order), so the HParams map has one defined byte form.
os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"

import tensorboard
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.text import metadata as text_metadata

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensorboard_events.json")
WALL = 1700000000.25


def hex_of(event):
    return event.SerializeToString(deterministic=True).hex()


def text_event(step, tag, markdown):
    # What the text plugin's summary writes: a scalar DT_STRING tensor and the plugin's metadata.
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=tensor_shape_pb2.TensorShapeProto(),
                                    string_val=[markdown.encode()])
    value = summary_pb2.Summary.Value(tag=tag, tensor=tensor,
                                      metadata=text_metadata.create_summary_metadata(display_name=None, description=None))
    return event_pb2.Event(wall_time=WALL, step=step, summary=summary_pb2.Summary(value=[value]))


def hparams_event(step, tag, plugin_data):
    # What the HParams plugin's summary_v2 writes (its _summary_pb): the data in the metadata.
    value = summary_pb2.Summary.Value(tag=tag, metadata=hparams_metadata.create_summary_metadata(plugin_data),
                                      tensor=hparams_metadata.NULL_TENSOR)
    return event_pb2.Event(wall_time=WALL, step=step, summary=summary_pb2.Summary(value=[value]))


def session_start(step, hparams):
    start = plugin_data_pb2.SessionStartInfo(start_time_secs=WALL)  # no group name: a group per run
    for name, value in hparams:
        if isinstance(value, bool):
            start.hparams[name].bool_value = value
        elif isinstance(value, float):
            start.hparams[name].number_value = value
        else:
            start.hparams[name].string_value = value
    return hparams_event(step, hparams_metadata.SESSION_START_INFO_TAG,
                         plugin_data_pb2.HParamsPluginData(session_start_info=start))


def session_end(step, status):
    end = plugin_data_pb2.SessionEndInfo(status=status, end_time_secs=WALL)
    return hparams_event(step, hparams_metadata.SESSION_END_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_end_info=end))


def main():
    scalars = [["train/loss", 2.5], ["train/lr", 0.001], ["train/zero", 0.0]]
    # A tag's first value carries its description (SummaryMetadata.summary_description), which
    # TensorBoard's scalar migration keeps and shows beside the chart; later values go without.
    described = [["train/loss", 2.5, "MLM cross-entropy (nats)"], ["train/lr", 0.001, ""]]
    hparams = [["model.attention", "softmax"], ["model.hidden_size", 64.0], ["optimizer.fused", True],
               ["schedule.min_lr", 0.0], ["train.seed", 1234.0]]
    text = "```yaml\nmodel:\n  hidden_size: 64\n```\n"
    events = {
        "file_version": hex_of(event_pb2.Event(wall_time=WALL, file_version="brain.Event:2")),
        "session_start": hex_of(event_pb2.Event(wall_time=WALL, step=5,
                                                session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))),
        "session_start_step0": hex_of(event_pb2.Event(wall_time=WALL,
                                                      session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))),
        "scalars": hex_of(event_pb2.Event(wall_time=WALL, step=10, summary=summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in scalars]))),
        "scalars_described": hex_of(event_pb2.Event(wall_time=WALL, step=10, summary=summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=t, simple_value=v,
                                      metadata=summary_pb2.SummaryMetadata(summary_description=d) if d else None)
            for t, v, d in described]))),
        "text": hex_of(text_event(0, "config", text)),
        "hparams_start": hex_of(session_start(7, hparams)),
        "hparams_end": hex_of(session_end(600, api_pb2.STATUS_SUCCESS)),
    }
    crc_inputs = ["", "a", "brain.Event:2", bytes(range(32)).hex()]
    golden = {
        "generator": "tests/golden/make_tensorboard_golden.py",
        "tensorboard_version": tensorboard.__version__,
        "inputs": {"wall_time": WALL, "scalars": scalars, "scalars_described": described, "hparams": hparams, "text": text},
        "events": events,
        # masked CRC-32C as TensorBoard's reader computes it; the 64-digit key is the bytes 0..31 in hex.
        "masked_crc32c": {s: masked_crc32c(bytes.fromhex(s) if len(s) == 64 else s.encode()) for s in crc_inputs},
    }
    with open(OUT, "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
