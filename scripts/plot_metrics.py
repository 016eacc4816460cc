#!/usr/bin/env python3
"""Plots RUN_DIR/metrics.jsonl (written by `roformer train`) to a PNG: training loss and MLM accuracy
(with validation points), and the learning rate, against the step.

The run's config.yaml (beside metrics.jsonl) says at which rates training and validation masked:
training accuracy is measured on the batches' own masks (masking.mask_prob, 40% in the shipped
configs), validation accuracy at eval.mask_prob (15%), so the two curves are labelled and not
comparable. The learning rate is drawn for every step from the config's schedule (the formula of
src/train/schedule.h), with the logged values as points: logging steps alone would draw a 60-step
WSD run as a triangle.

usage: scripts/plot_metrics.py RUN_DIR/metrics.jsonl [-o out.png]
Needs matplotlib: a Python without it runs the script again with the project venv's Python
(scripts/setup.sh installs matplotlib there with `make demo`).
"""
import argparse
import json
import math
import os
import subprocess
import sys


def ensure_matplotlib() -> None:
    """Re-runs this script under the project venv's Python when this one lacks matplotlib."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    venv = subprocess.run(["bash", os.path.join(here, "setup.sh"), "venv"], capture_output=True, text=True,
                          check=True).stdout.strip()
    python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv) or not os.access(python, os.X_OK):
        sys.exit(f"error: {sys.executable} has no matplotlib and the project venv {venv} cannot provide it: run "
                 "`make demo` (or scripts/setup.sh demo) first, which installs it")
    os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])


def read_config(path):
    """{section: {key: value text}} of a run's config.yaml as roformer writes it ("section:" lines, then
    "  key: value" lines); {} when there is none."""
    config, section = {}, None
    try:
        with open(path) as f:
            for line in f:
                line = line.split("#", 1)[0].rstrip()
                if not line:
                    continue
                if not line.startswith(" ") and line.endswith(":"):
                    section = config.setdefault(line[:-1], {})
                elif section is not None and ":" in line:
                    key, value = line.strip().split(":", 1)
                    section[key] = value.strip()
    except OSError:
        return {}
    return config


def number(config, section, key, default=None):
    try:
        return float(config[section][key])
    except (KeyError, ValueError):
        return default


def schedule_lr(config):
    """The learning rate of every optimizer step (0-based) under the config's schedule, as
    train::LrSchedule computes it (src/train/schedule.h); None when the config does not say."""
    peak = number(config, "optimizer", "lr")
    total = number(config, "train", "steps")
    if peak is None or total is None:
        return None
    total = int(total)
    kind = config.get("schedule", {}).get("type", "linear")
    warmup = int(number(config, "schedule", "warmup_steps", 0))
    if warmup > total:  # a run shorter than its warmup: half of it warms up (LrSchedule's shortening)
        warmup = total // 2
    low = number(config, "schedule", "min_lr", 0.0)
    fraction = number(config, "schedule", "decay_fraction", 0.2)
    decay = int(round_half_away(fraction * total))
    if kind == "wsd" and total > 0:
        decay = max(1, decay)  # a wsd decay of at least one step
    decay_start = max(warmup, total - decay)

    def lr(step):
        if step < warmup:
            return peak * (step + 1) / warmup
        if kind == "constant":
            return peak
        start = decay_start if kind == "wsd" else warmup
        if step < start:
            return peak
        p = min(1.0, max(0.0, (step - start) / max(1, total - start - 1)))
        if kind == "cosine":
            return low + (peak - low) * 0.5 * (1.0 + math.cos(math.pi * p))
        return low + (peak - low) * (1.0 - p)

    return [lr(step) for step in range(total)]


def round_half_away(x):
    """std::llround: halves away from zero (Python's round() rounds them to even)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def percent(config, section):
    rate = number(config, section, "mask_prob")
    return f"{100 * rate:g}%" if rate is not None else "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("metrics", help="metrics.jsonl of a run")
    ap.add_argument("-o", "--out", help="output PNG (default: next to the metrics file)")
    args = ap.parse_args()
    train, evals = [], []
    with open(args.metrics) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                print(f"{args.metrics}:{n}: skipping a malformed line", file=sys.stderr)
                continue
            (evals if rec.get("type") == "eval" else train).append(rec)
    if not train and not evals:
        print(f"error: {args.metrics} holds no records", file=sys.stderr)
        return 1
    ensure_matplotlib()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    config = read_config(os.path.join(os.path.dirname(os.path.abspath(args.metrics)), "config.yaml"))
    train_rate, eval_rate = percent(config, "masking"), percent(config, "eval")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
    ax = axes[0]
    # A train record holds the logging window's means (loss_avg, accuracy_avg) and the logging
    # step's batch figures (loss, accuracy); records written before accuracy_avg have the batch's only.
    ax.plot([r["step"] for r in train], [r.get("loss_avg", r["loss"]) for r in train],
            label=f"train, {train_rate} masked (window mean)")
    ax.plot([r["step"] for r in evals], [r["loss"] for r in evals], "o-", label=f"validation, {eval_rate} masked")
    ax.set_title("MLM loss"), ax.set_xlabel("step"), ax.legend()
    ax = axes[1]
    if all("accuracy_avg" in r for r in train):
        ax.plot([r["step"] for r in train], [r["accuracy_avg"] for r in train],
                label=f"train, {train_rate} masked (window mean)")
    else:
        ax.plot([r["step"] for r in train], [r["accuracy"] for r in train], label=f"train, {train_rate} masked (one batch)")
    ax.plot([r["step"] for r in evals], [r["accuracy"] for r in evals], "o-", label=f"validation, {eval_rate} masked")
    title = "MLM accuracy"
    if train_rate != eval_rate:
        title += f"\n(train at {train_rate} masking, validation at {eval_rate}: not comparable)"
    ax.set_title(title), ax.set_xlabel("step"), ax.legend()
    ax = axes[2]
    curve = schedule_lr(config)
    if curve:
        kind = config.get("schedule", {}).get("type", "?")
        ax.plot(range(1, len(curve) + 1), curve, label=f"schedule ({kind}, every step)")  # x: steps done, as logged
    ax.plot([r["step"] for r in train], [r["lr"] for r in train], "o", ms=3, label="logged")
    ax.set_title("learning rate"), ax.set_xlabel("step"), ax.legend()
    fig.tight_layout()
    out = args.out or args.metrics.rsplit(".", 1)[0] + ".png"
    fig.savefig(out, dpi=100)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
