#!/usr/bin/env python3
"""The report of scripts/compare_positions.sh: reads OUT/evals.jsonl (final evaluations at 1x, 2x and
4x the training length) and each run's metrics.jsonl (validation during training), and writes
OUT/results.md (markdown tables and the verdict on the paper's claim), OUT/results.json and
OUT/curves.png (validation loss and MLM accuracy against the step).

usage: scripts/compare_positions_report.py OUT
The claim checked (RoFormer, Su et al. 2021, section 4.5.1 / figure 3): with rotary position
embedding the MLM loss falls faster than with BERT's learned absolute positions. Here: the mean over
seeds of the validation loss at each evaluation step, rotary against absolute.
"""
import json
import os
import statistics
import sys

ORDER = ["rotary", "absolute", "none", "rotary-linear"]
LABEL = {"rotary": "rotary (RoPE)", "absolute": "absolute (learned, BERT)", "none": "none (control)",
         "rotary-linear": "rotary + linear attention"}


def read_jsonl(path):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    print(f"{path}:{n}: skipping a malformed line", file=sys.stderr)
    return out


def mean(xs):
    return statistics.fmean(xs) if xs else float("nan")


def spread(xs, fmt):
    """'m' for one value, 'm ± s' (sample standard deviation) for several."""
    if not xs:
        return "-"
    if len(xs) == 1:
        return fmt.format(xs[0])
    return (fmt + " ± " + fmt).format(statistics.fmean(xs), statistics.stdev(xs))


def load(out_dir):
    finals = read_jsonl(os.path.join(out_dir, "evals.jsonl"))
    if not finals:
        raise SystemExit(f"error: {out_dir}/evals.jsonl holds no evaluations; run scripts/compare_positions.sh first")
    runs = {}
    for rec in finals:
        key = (rec["variant"], rec["seed"])
        run = runs.setdefault(key, {"variant": rec["variant"], "seed": rec["seed"], "dir": rec["run"], "final": {}})
        run["final"][rec["mult"]] = rec
    for run in runs.values():
        metrics = read_jsonl(os.path.join(run["dir"], "metrics.jsonl"))
        run["curve"] = [(r["step"], r["loss"], r["accuracy"]) for r in metrics if r.get("type") == "eval"]
        train = [r for r in metrics if r.get("type") == "train"]
        run["tokens_per_s"] = mean([r["tokens_per_s"] for r in train[1:]] or [r["tokens_per_s"] for r in train])
        run["steps"] = train[-1]["step"] if train else 0
        run["tokens_seen"] = train[-1]["tokens_seen"] if train else 0
    return runs


def by_variant(runs):
    out = {}
    for run in runs.values():
        out.setdefault(run["variant"], []).append(run)
    return {v: sorted(out[v], key=lambda r: r["seed"]) for v in ORDER if v in out}


def mean_curve(group):
    """step -> (mean loss, mean accuracy) over the runs that evaluated at that step."""
    steps = sorted({s for run in group for s, _, _ in run["curve"]})
    curve = {}
    for s in steps:
        points = [(l, a) for run in group for st, l, a in run["curve"] if st == s]
        if len(points) == len(group):
            curve[s] = (mean([p[0] for p in points]), mean([p[1] for p in points]))
    return curve


def verdict(variants):
    if "rotary" not in variants or "absolute" not in variants:
        return "The claim needs both the rotary and the absolute variant; this comparison lacks one."
    rot, ab = mean_curve(variants["rotary"]), mean_curve(variants["absolute"])
    steps = sorted(set(rot) & set(ab))
    if not steps:
        return "No common validation steps for rotary and absolute (eval.every is 0?): no verdict."
    lower = [s for s in steps if rot[s][0] < ab[s][0]]
    last = steps[-1]
    ab_final = ab[last][0]
    reach = next((s for s in steps if rot[s][0] <= ab_final), None)
    seeds = len(variants["rotary"])
    held = len(lower) == len(steps)
    text = (f"Rotary's mean validation loss ({seeds} seed{'s' if seeds > 1 else ''}) was below absolute's at "
            f"{len(lower)} of {len(steps)} evaluations (steps {steps[0]}..{last}); at step {last} it was "
            f"{rot[last][0]:.4f} against {ab_final:.4f} ({rot[last][0] - ab_final:+.4f}), MLM accuracy "
            f"{rot[last][1]:.4f} against {ab[last][1]:.4f}. ")
    if reach is not None:
        text += f"Rotary reached absolute's final validation loss at step {reach} of {last}. "
    if held:
        text += "**The paper's claim (the MLM loss falls faster with rotary positions) held here.**"
    elif not lower:
        text += "**The paper's claim did not hold here: absolute was at least as good at every evaluation.**"
    else:
        text += ("**The claim held only in part here: rotary was ahead at the steps "
                 + ", ".join(str(s) for s in lower) + " and not at the others.**")
    return text


def final_cell(group, mult, field, fmt):
    vals, refused = [], []
    for run in group:
        rec = run["final"].get(mult)
        if rec is None:
            continue
        if "refused" in rec:
            refused.append(rec)
        else:
            vals.append(rec["eval"][field])
    if refused and not vals:
        return "refused"
    return spread(vals, fmt)


def write_report(out_dir, runs):
    variants = by_variant(runs)
    any_run = next(iter(runs.values()))
    seq = next((r["eval"]["train_seq_len"] for run in runs.values() for r in run["final"].values() if "eval" in r), 0)
    seeds = sorted({run["seed"] for run in runs.values()})
    lines = [
        "# Position schemes compared (scripts/compare_positions.sh)",
        "",
        f"Each run: {any_run['steps']} steps, {any_run['tokens_seen']} training tokens, trained at {seq} tokens; "
        f"seeds {', '.join(str(s) for s in seeds)}. Final evaluation on the whole validation split with "
        "`roformer eval --seq-len` (mask seed 0); mean ± sample standard deviation over seeds.",
        "",
        f"| variant | valid loss @{seq} | MLM acc @{seq} | MLM acc @{2 * seq} | MLM acc @{4 * seq} "
        f"| loss @{2 * seq} | loss @{4 * seq} | train tokens/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v, group in variants.items():
        lines.append(
            f"| {LABEL[v]} | {final_cell(group, 1, 'loss', '{:.4f}')} | {final_cell(group, 1, 'accuracy', '{:.4f}')} "
            f"| {final_cell(group, 2, 'accuracy', '{:.4f}')} | {final_cell(group, 4, 'accuracy', '{:.4f}')} "
            f"| {final_cell(group, 2, 'loss', '{:.4f}')} | {final_cell(group, 4, 'loss', '{:.4f}')} "
            f"| {spread([r['tokens_per_s'] for r in group], '{:.0f}')} |")
    refusals = sorted({rec["refused"] for run in runs.values() for rec in run["final"].values() if "refused" in rec})
    if refusals:
        lines += ["", "Refused evaluations (roformer eval's message):", ""] + [f"- {r}" for r in refusals]
    lines += ["", "Validation loss during training (mean over seeds; eval.max_sequences sequences at the training "
              "length):", ""]
    curves = {v: mean_curve(g) for v, g in variants.items()}
    steps = sorted(set().union(*[set(c) for c in curves.values()]))
    lines.append("| step | " + " | ".join(LABEL[v] for v in curves) + " |")
    lines.append("|---|" + "---|" * len(curves))
    for s in steps:
        lines.append(f"| {s} | " + " | ".join(f"{curves[v][s][0]:.4f}" if s in curves[v] else "-" for v in curves)
                     + " |")
    lines += ["", "## The paper's claim", "", verdict(variants), ""]
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines))
    summary = {f"{run['variant']}-s{run['seed']}": {k: run[k] for k in ("variant", "seed", "dir", "steps",
                                                                        "tokens_seen", "tokens_per_s", "curve")}
               | {"final": {str(m): r for m, r in run["final"].items()}} for run in runs.values()}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return variants, curves


def plot(out_dir, variants):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    colors = {"rotary": "tab:blue", "absolute": "tab:orange", "none": "tab:gray", "rotary-linear": "tab:green"}
    for v, group in variants.items():
        for i, run in enumerate(group):
            steps = [p[0] for p in run["curve"]]
            label = LABEL[v] if i == 0 else None
            axes[0].plot(steps, [p[1] for p in run["curve"]], "o-", ms=3, color=colors[v], label=label, alpha=0.85)
            axes[1].plot(steps, [p[2] for p in run["curve"]], "o-", ms=3, color=colors[v], label=label, alpha=0.85)
    axes[0].set_ylabel("validation MLM loss")
    axes[1].set_ylabel("validation MLM accuracy")
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("Position schemes at an equal budget (one line per run)")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "curves.png"), dpi=110)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    out_dir = sys.argv[1]
    runs = load(out_dir)
    variants, _ = write_report(out_dir, runs)
    plot(out_dir, variants)
    print(open(os.path.join(out_dir, "results.md")).read())
    print(f"wrote {out_dir}/results.md, results.json, curves.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
