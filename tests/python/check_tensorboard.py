#!/usr/bin/env python3
"""Reads roformer's TensorBoard event files with TensorBoard's own code (tensorboard from PyPI, no
TensorFlow) and checks them against the run's metrics.jsonl and config.yaml.

usage:
  check_tensorboard.py run RUN_DIR [--restarted]
      EventAccumulator over RUN_DIR (its event files): every tag of a metrics field (train/loss, ...,
      eval/top5) holds the metrics.jsonl values, as float32, at the same steps, each step once and
      in order, each carries a description, and no other scalar tag exists; the "config" text holds RUN_DIR/config.yaml; the
      HParams session start lists the config's settings and the session end says success.
      --restarted: the raw files hold some (tag, step) twice, written by a process killed after its
      last checkpoint, so the single curves above prove TensorBoard dropped them.
  check_tensorboard.py hparams LOGDIR RUN...
      The HParams plugin's own session-group listing (what its tab shows) over LOGDIR finds exactly
      the given runs, named as TensorBoard names them: the run directory relative to LOGDIR, each with the settings of its config
      and, as metrics, the last eval/accuracy and eval/loss of its metrics.jsonl.
  check_tensorboard.py corrupt EVENT_FILE
      TensorBoard's reader reads every record of the file; flipping one byte of any record's data
      checksum (or length checksum) makes it stop right before that record.
Exit 0 when every check holds; prints what it checked, or the first failure.
"""
import json
import os
import struct
import sys
import tempfile

from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.plugins.hparams import plugin_data_pb2
from tensorboard.util import tensor_util

# metrics.jsonl (type, field) -> tag: the spec of src/metrics/records.h's field lists.
TAGS = {
    ("train", "loss"): "train/loss", ("train", "loss_avg"): "train/loss_avg",
    ("train", "accuracy"): "train/accuracy", ("train", "accuracy_avg"): "train/accuracy_avg",
    ("train", "lr"): "train/lr", ("train", "grad_norm"): "train/grad_norm",
    ("train", "tokens_per_s"): "train/tokens_per_s", ("train", "mfu"): "train/mfu",
    ("train", "loss_scale"): "train/loss_scale",
    ("eval", "loss"): "eval/loss", ("eval", "accuracy"): "eval/accuracy", ("eval", "perplexity"): "eval/perplexity",
    ("eval", "top5_accuracy"): "eval/top5",
}
ALWAYS = ["train/loss", "train/accuracy", "train/lr", "train/grad_norm", "train/tokens_per_s"]


class CheckFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CheckFailed(message)


def as_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def read_metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def config_body(run_dir):
    with open(os.path.join(run_dir, "config.yaml")) as f:
        return "".join(line for line in f if not line.startswith("#"))


def check_scalars(acc, metrics):
    present = set(acc.Tags()["scalars"])
    expected_tags = set()
    for (kind, field), tag in TAGS.items():
        want = [(r["step"], as_float32(r[field])) for r in metrics if r.get("type") == kind and field in r]
        if not want:
            check(tag not in present, f"{tag}: in the event files but in no metrics.jsonl record")
            continue
        expected_tags.add(tag)
        check(tag in present, f"{tag}: missing (metrics.jsonl has {len(want)} values)")
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        steps = [s for s, _ in got]
        check(steps == sorted(set(steps)), f"{tag}: steps not strictly increasing (a step twice?): {steps}")
        check([s for s, _ in want] == steps, f"{tag}: steps {steps} != metrics.jsonl's {[s for s, _ in want]}")
        bad = [(s, g, w) for (s, g), (_, w) in zip(got, want) if g != w]
        check(not bad, f"{tag}: values differ from metrics.jsonl (step, ours, metrics): {bad[:3]}")
    check(present == expected_tags, f"scalar tags without a metrics field: {sorted(present - expected_tags)}")
    undescribed = sorted(t for t in present if not acc.SummaryMetadata(t).summary_description)
    check(not undescribed, f"tags without the description TensorBoard shows beside the chart: {undescribed}")
    for tag in ALWAYS:
        check(tag in present, f"{tag}: missing")
    print(f"scalars: {len(present)} tags equal metrics.jsonl ({len(acc.Scalars('train/loss'))} train steps): "
          f"{', '.join(sorted(present))}")


def check_config_and_hparams(acc, run_dir):
    texts = acc.Tensors("config")
    text = tensor_util.make_ndarray(texts[-1].tensor_proto).item().decode()
    check(config_body(run_dir) in text, "the config text does not hold config.yaml")
    content = acc.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    hp = {k: v for k, v in start.hparams.items()}
    for name in ("model.hidden_size", "model.position", "optimizer.lr", "train.steps", "schedule.type"):
        check(name in hp, f"HParams: {name} missing from the session start")
    end = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_end_info"]).session_end_info
    check(end.status == 1, f"HParams: session end status {end.status}, expected STATUS_SUCCESS (1)")
    print(f"config text holds config.yaml ({len(texts)} text event(s)); HParams session: {len(hp)} settings, "
          f"model.position={hp['model.position'].string_value}, ended with success")


def event_files(tb_dir):
    return sorted(n for n in os.listdir(tb_dir) if n.startswith("events.out.tfevents."))


def raw_duplicates(tb_dir):
    seen, twice = set(), set()
    for name in event_files(tb_dir):
        for event in event_file_loader.EventFileLoader(os.path.join(tb_dir, name)).Load():
            for v in event.summary.value:
                key = (v.tag, event.step)
                (twice if key in seen else seen).add(key)
    return twice


def check_run(run_dir, restarted):
    tb_dir = run_dir  # the event files lie in the run directory (checkpoint/run_layout.h)
    acc = event_accumulator.EventAccumulator(tb_dir, size_guidance={event_accumulator.SCALARS: 0,
                                                                    event_accumulator.TENSORS: 0})
    acc.Reload()
    check_scalars(acc, read_metrics(run_dir))
    check_config_and_hparams(acc, run_dir)
    twice = sorted(raw_duplicates(tb_dir))
    files = len(event_files(tb_dir))
    if restarted:
        check(twice, "--restarted: no (tag, step) was written twice, so nothing was there to drop")
        print(f"{files} event files; {len(twice)} (tag, step) pairs written twice (first: {twice[0]}) were dropped "
              "by TensorBoard's SessionLog START purge: one curve per tag")
    else:
        check(not twice, f"a (tag, step) written twice without a restart: {twice[:3]}")


def check_hparams(logdir, runs):
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import api_pb2, backend_context, list_session_groups

    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    tb = base_plugin.TBContext(logdir=logdir, multiplexer=mux,
                               data_provider=data_provider.MultiplexerDataProvider(mux, logdir))
    # What the tab asks for by default: every status, the first 100 groups.
    statuses = [api_pb2.STATUS_UNKNOWN, api_pb2.STATUS_SUCCESS, api_pb2.STATUS_FAILURE, api_pb2.STATUS_RUNNING]
    request = api_pb2.ListSessionGroupsRequest(start_index=0, slice_size=100, allowed_statuses=statuses)
    response = list_session_groups.Handler(context.RequestContext(), backend_context.Context(tb), "", request).run()
    sessions = {s.name: (g, s) for g in response.session_groups for s in g.sessions}
    # TensorBoard names a run by the folder of its event files: the run directory's name.
    check(set(sessions) == set(runs), f"HParams sessions (TensorBoard's run names) {sorted(sessions)} != {sorted(runs)}")
    for run in runs:
        group, session = sessions[run]
        evals = [r for r in read_metrics(os.path.join(logdir, run)) if r.get("type") == "eval"]
        metrics = {m.name.tag: m.value for m in session.metric_values}
        for tag, field in (("eval/accuracy", "accuracy"), ("eval/loss", "loss")):
            check(tag in metrics, f"{run}: HParams metric {tag} missing (has {sorted(metrics)})")
            check(metrics[tag] == as_float32(evals[-1][field]), f"{run}: {tag} {metrics[tag]} != last eval")
        check(session.status == 1, f"{run}: session status {session.status}")
        position = group.hparams["model.position"].string_value
        print(f"HParams tab: {run}: model.position={position}, eval/accuracy={metrics['eval/accuracy']:.4f}, "
              f"{len(group.hparams)} settings, {len(metrics)} metrics, success")


def load_count(path):
    return sum(1 for _ in event_file_loader.RawEventFileLoader(path).Load())


def check_corrupt(path):
    data = open(path, "rb").read()
    offsets, pos = [], 0
    while pos < len(data):
        offsets.append(pos)
        (length,) = struct.unpack("<Q", data[pos:pos + 8])
        pos += 12 + length + 4
    check(pos == len(data), "the records do not add up to the file size")
    check(load_count(path) == len(offsets), f"TensorBoard read {load_count(path)} of {len(offsets)} intact records")
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, os.path.basename(path))
        for k, start in enumerate(offsets):
            (length,) = struct.unpack("<Q", data[start:start + 8])
            for flip in (start + 8, start + 12 + length + 3):  # the length's checksum, the data's
                broken = bytearray(data)
                broken[flip] ^= 0x01
                with open(copy, "wb") as f:
                    f.write(broken)
                check(load_count(copy) == k, f"record {k}: a flipped checksum byte at {flip} read {load_count(copy)}")
    print(f"corrupt: TensorBoard reads all {len(offsets)} records; a flipped checksum byte in any of them stops it there")


def main():
    try:
        if len(sys.argv) >= 3 and sys.argv[1] == "run":
            check_run(sys.argv[2], "--restarted" in sys.argv[3:])
        elif len(sys.argv) >= 4 and sys.argv[1] == "hparams":
            check_hparams(sys.argv[2], sys.argv[3:])
        elif len(sys.argv) == 3 and sys.argv[1] == "corrupt":
            check_corrupt(sys.argv[2])
        else:
            print(__doc__)
            return 2
    except CheckFailed as e:
        print(f"FAILED: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
