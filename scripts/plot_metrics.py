#!/usr/bin/env python3
"""Plots RUN_DIR/metrics.jsonl (written by `roformer train`) to a PNG: training loss and MLM accuracy
(with validation points), and the learning rate, against the step.

usage: scripts/plot_metrics.py RUN_DIR/metrics.jsonl [-o out.png]
Needs matplotlib: a Python without it runs the script again with the project venv's Python
(scripts/setup.sh installs matplotlib there with `make demo`).
"""
import argparse
import json
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

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    ax = axes[0]
    ax.plot([r["step"] for r in train], [r.get("loss_avg", r["loss"]) for r in train], label="train")
    ax.plot([r["step"] for r in evals], [r["loss"] for r in evals], "o-", label="validation")
    ax.set_title("MLM loss"), ax.set_xlabel("step"), ax.legend()
    ax = axes[1]
    ax.plot([r["step"] for r in train], [r["accuracy"] for r in train], label="train (batch)")
    ax.plot([r["step"] for r in evals], [r["accuracy"] for r in evals], "o-", label="validation")
    ax.set_title("MLM accuracy"), ax.set_xlabel("step"), ax.legend()
    ax = axes[2]
    ax.plot([r["step"] for r in train], [r["lr"] for r in train])
    ax.set_title("learning rate"), ax.set_xlabel("step")
    fig.tight_layout()
    out = args.out or args.metrics.rsplit(".", 1)[0] + ".png"
    fig.savefig(out, dpi=100)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
