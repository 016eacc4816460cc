#!/usr/bin/env python3
"""The report of scripts/compare_runs.sh (and its wrappers compare_positions.sh, compare_recipe.sh):
reads OUT/variants.json (the variants in order, their labels and overrides, the claim to judge),
OUT/evals.jsonl (final evaluations at multiples of the training length) and each run's metrics.jsonl
(validation during training), and writes OUT/results.md (markdown tables and the verdict of the
claim), OUT/results.json and OUT/curves.png (validation loss and MLM accuracy against the step).

usage: scripts/compare_report.py OUT
Claims:
  positions  (RoFormer, Su et al. 2021, section 4.5.1 / figure 3): with rotary position embedding
             the MLM loss falls faster than with BERT's learned absolute positions. Here: the
             validation loss at each evaluation step, rotary against absolute; a step counts for a
             side only when every seed of it is below every seed of the other, and one seed gives
             no verdict (its spread is unknown).
  recipe     each variant against the first (the baseline): the final validation MLM accuracy at
             the training length, seed by seed (same seed, same data order and evaluation), at every
             budget. A gain is "clear" when every seed gains at every budget.
"""
import json
import os
import statistics
import sys


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


def spread(xs, fmt, sd_fmt=None):
    """'m' for one value, 'm ± s' (sample standard deviation) for several."""
    if not xs:
        return "-"
    if len(xs) == 1:
        return fmt.format(xs[0])
    return fmt.format(statistics.fmean(xs)) + " ± " + (sd_fmt or fmt).format(statistics.stdev(xs))


def load(out_dir):
    with open(os.path.join(out_dir, "variants.json")) as f:
        meta = json.load(f)
    finals = read_jsonl(os.path.join(out_dir, "evals.jsonl"))
    if not finals:
        raise SystemExit(f"error: {out_dir}/evals.jsonl holds no evaluations; run scripts/compare_runs.sh first")
    runs = {}
    for rec in finals:
        key = os.path.basename(rec["run"])
        run = runs.setdefault(key, {"variant": rec["variant"], "seed": rec["seed"], "budget": rec.get("steps"),
                                    "dir": rec["run"], "final": {}})
        run["final"][rec["mult"]] = rec
    for run in runs.values():
        metrics = read_jsonl(os.path.join(run["dir"], "metrics.jsonl"))
        run["curve"] = [(r["step"], r["loss"], r["accuracy"]) for r in metrics if r.get("type") == "eval"]
        train = [r for r in metrics if r.get("type") == "train"]
        run["tokens_per_s"] = mean([r["tokens_per_s"] for r in train[1:]] or [r["tokens_per_s"] for r in train])
        run["steps"] = train[-1]["step"] if train else 0
        run["tokens_seen"] = train[-1]["tokens_seen"] if train else 0
    return meta, runs


def groups(meta, runs):
    """{budget: {variant: [runs by seed]}}, budgets ascending, variants in the file's order."""
    budgets = sorted({run["budget"] for run in runs.values()}, key=lambda b: b or 0)
    out = {}
    for b in budgets:
        per = {}
        for v in (x["name"] for x in meta["variants"]):
            group = sorted((r for r in runs.values() if r["variant"] == v and r["budget"] == b), key=lambda r: r["seed"])
            if group:
                per[v] = group
        out[b] = per
    return out


def mean_curve(group):
    """step -> (mean loss, mean accuracy) over the runs that evaluated at that step."""
    steps = sorted({s for run in group for s, _, _ in run["curve"]})
    curve = {}
    for s in steps:
        points = [(l, a) for run in group for st, l, a in run["curve"] if st == s]
        if len(points) == len(group):
            curve[s] = (mean([p[0] for p in points]), mean([p[1] for p in points]))
    return curve


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


def final_value(run, field="accuracy"):
    rec = run["final"].get(1)
    return rec["eval"][field] if rec and "eval" in rec else None


def seed_losses(group, step):
    """The validation loss of each run of the group at `step`."""
    return [l for run in group for st, l, _ in run["curve"] if st == step]


def verdict_positions(variants):
    """Judged only where the seeds say something: a step counts for rotary when every rotary seed's
    loss is below every absolute seed's (and the other way round); with one seed there is no spread,
    so no verdict."""
    if "rotary" not in variants or "absolute" not in variants:
        return "The claim needs both the rotary and the absolute variant; this comparison lacks one."
    rot_g, ab_g = variants["rotary"], variants["absolute"]
    rot, ab = mean_curve(rot_g), mean_curve(ab_g)
    steps = sorted(set(rot) & set(ab))
    if not steps:
        return "No common validation steps for rotary and absolute (eval.every is 0?): no verdict."
    last = steps[-1]
    ab_final = ab[last][0]
    reach = next((s for s in steps if rot[s][0] <= ab_final), None)
    seeds = min(len(rot_g), len(ab_g))
    text = (f"Rotary's mean validation loss ({seeds} seed{'s' if seeds > 1 else ''}) was below absolute's at "
            f"{sum(rot[s][0] < ab[s][0] for s in steps)} of {len(steps)} evaluations (steps {steps[0]}..{last}); "
            f"at step {last} it was {rot[last][0]:.4f} against {ab_final:.4f} ({rot[last][0] - ab_final:+.4f}), "
            f"MLM accuracy {rot[last][1]:.4f} against {ab[last][1]:.4f}. ")
    if reach is not None:
        text += f"Rotary reached absolute's final validation loss at step {reach} of {last}. "
    claim = "the MLM loss falls faster with rotary positions"
    if seeds < 2:
        return text + (f"**Not enough runs to judge the paper's claim ({claim}):** one seed shows no spread, so a "
                       "difference cannot be told from noise; run at least two seeds (--seeds \"1234 1235\").")
    ahead = [s for s in steps if max(seed_losses(rot_g, s)) < min(seed_losses(ab_g, s))]
    behind = [s for s in steps if max(seed_losses(ab_g, s)) < min(seed_losses(rot_g, s))]
    within = [s for s in steps if s not in ahead and s not in behind]
    listed = lambda xs: ", ".join(str(s) for s in xs)  # noqa: E731
    if len(ahead) == len(steps):
        return text + (f"**The paper's claim ({claim}) held here:** every rotary seed was below every absolute "
                       f"seed at every evaluation ({seeds} seeds).")
    if len(behind) == len(steps):
        return text + (f"**The paper's claim ({claim}) did not hold here:** every absolute seed was below every "
                       f"rotary seed at every evaluation ({seeds} seeds).")
    if not ahead and not behind:
        return text + (f"**Not enough to judge the paper's claim ({claim}):** the two overlap within the seeds' "
                       f"spread at every evaluation ({seeds} seeds); more seeds or steps would tell.")
    return text + (f"**The claim ({claim}) held only in part:** rotary was clearly ahead (every seed) at steps "
                   f"{listed(ahead) or 'none'}, absolute at {listed(behind) or 'none'}, and the two were within "
                   f"the seeds' spread at {listed(within) or 'none'} ({seeds} seeds).")


def recipe_deltas(by_budget, base):
    """{variant: {budget: [accuracy - baseline's, seed by seed]}} over the seeds both ran."""
    out = {}
    for b, variants in by_budget.items():
        if base not in variants:
            continue
        base_acc = {r["seed"]: final_value(r) for r in variants[base]}
        for v, group in variants.items():
            if v == base:
                continue
            d = [final_value(r) - base_acc[r["seed"]] for r in group
                 if final_value(r) is not None and base_acc.get(r["seed"]) is not None]
            out.setdefault(v, {})[b] = d
    return out


def verdict_recipe(meta, by_budget, labels):
    names = [x["name"] for x in meta["variants"]]
    base = names[0]
    deltas = recipe_deltas(by_budget, base)
    budgets = list(by_budget)
    head = " | ".join(f"Δ acc, {b} steps" if b else "Δ acc" for b in budgets)
    lines = [f"Final validation MLM accuracy (15% masking at evaluation) against **{labels[base]}**, seed by seed "
             "(each seed's run against the baseline's run of the same seed); mean ± sd of the differences and "
             "how many seeds gained:", "", f"| variant | {head} | verdict |", "|---|" + "---|" * (len(budgets) + 1)]
    for v in names[1:]:
        if v not in deltas:
            continue
        cells, every_gain, every_loss, complete = [], True, True, True
        for b in budgets:
            d = deltas[v].get(b, [])
            if not d:
                cells.append("-")
                complete = False
                continue
            cells.append(f"{spread(d, '{:+.4f}', '{:.4f}')} ({sum(x > 0 for x in d)}/{len(d)})")
            every_gain &= all(x > 0 for x in d)
            every_loss &= all(x < 0 for x in d)
        if not complete:
            word = "incomplete"
        elif every_gain:
            word = "**clear gain**"
        elif every_loss:
            word = "clear loss"
        elif all(x == 0 for b in budgets for x in deltas[v][b]):
            word = "no difference"
        else:
            word = "mixed"
        lines.append(f"| {labels[v]} | " + " | ".join(cells) + f" | {word} |")
    lines += ["", "A clear gain: every seed above the baseline at every budget; a clear loss: every seed below."]
    return "\n".join(lines)


def budget_title(b):
    return f"{b} steps: " if b else ""


def write_report(out_dir, meta, runs):
    by_budget = groups(meta, runs)
    labels = {x["name"]: x["label"] for x in meta["variants"]}
    any_run = next(iter(runs.values()))
    # The columns name the length each evaluation ran at: compare_runs.sh evaluates at mult x the
    # config's data.max_seq_len, whatever length a variant trained at (its own data.max_seq_len, or
    # the last of its train.phases).
    seq = next((r["eval"]["seq_len"] // m for run in runs.values() for m, r in run["final"].items() if "eval" in r), 0)
    trained = sorted({r["eval"]["train_seq_len"] for run in runs.values() for r in run["final"].values() if "eval" in r})
    trained_text = (f"trained at {trained[0] if trained else seq} tokens" if len(trained) <= 1 else
                    f"trained at {', '.join(str(t) for t in trained[:-1])} or {trained[-1]} tokens "
                    "(a phased run counts its last phase's length)")
    mults = sorted({m for run in runs.values() for m in run["final"]})
    longer = [m for m in mults if m != 1]
    seeds = sorted({run["seed"] for run in runs.values()})
    budgets = list(by_budget)
    budget_text = (", ".join(f"{b}" for b in budgets) + " steps" if budgets[0] else f"{any_run['steps']} steps, "
                   f"{any_run['tokens_seen']} training tokens")
    title = {"positions": "Position schemes compared (scripts/compare_positions.sh)",
             "recipe": "Pretraining recipes compared (scripts/compare_recipe.sh)"}.get(
                 meta.get("claim"), "Variants compared at an equal budget (scripts/compare_runs.sh)")
    lines = [
        f"# {title}",
        "",
        f"Each run: {budget_text}, {trained_text}; seeds {', '.join(str(s) for s in seeds)}. "
        "Final evaluation on the whole validation split with `roformer eval --seq-len` (mask seed 0); "
        "mean ± sample standard deviation over seeds.",
        "",
    ]
    cols = []
    for b in budgets:
        t = budget_title(b)
        cols += [(b, 1, "loss", f"{t}valid loss @{seq}"), (b, 1, "accuracy", f"{t}MLM acc @{seq}")]
        cols += [(b, m, "accuracy", f"{t}MLM acc @{m * seq}") for m in longer]
        cols += [(b, m, "loss", f"{t}loss @{m * seq}") for m in longer]
    lines.append("| variant | " + " | ".join(c[3] for c in cols) + " | train tokens/s |")
    lines.append("|---|" + "---|" * (len(cols) + 1))
    for v in labels:
        present = [by_budget[b][v] for b in budgets if v in by_budget[b]]
        if not present:
            continue
        cells = [final_cell(by_budget[b].get(v, []), m, f, "{:.4f}") for b, m, f, _ in cols]
        tps = [r["tokens_per_s"] for g in present for r in g]
        lines.append(f"| {labels[v]} | " + " | ".join(cells) + f" | {spread(tps, '{:.0f}')} |")
    refusals = sorted({rec["refused"] for run in runs.values() for rec in run["final"].values() if "refused" in rec})
    if refusals:
        lines += ["", "Refused evaluations (roformer eval's message):", ""] + [f"- {r}" for r in refusals]
    for b in budgets:
        curves = {v: mean_curve(g) for v, g in by_budget[b].items()}
        steps = sorted(set().union(*[set(c) for c in curves.values()]))
        lines += ["", f"Validation loss during training{f' ({b} steps)' if b else ''} (mean over seeds; "
                  "eval.max_sequences sequences at the training length):", ""]
        lines.append("| step | " + " | ".join(labels[v] for v in curves) + " |")
        lines.append("|---|" + "---|" * len(curves))
        for s in steps:
            lines.append(f"| {s} | " + " | ".join(f"{curves[v][s][0]:.4f}" if s in curves[v] else "-"
                                                  for v in curves) + " |")
    if meta.get("claim") == "positions":
        lines += ["", "## The paper's claim", "", verdict_positions(by_budget[budgets[-1]]), ""]
    elif meta.get("claim") == "recipe":
        lines += ["", "## Against the baseline", "", verdict_recipe(meta, by_budget, labels), ""]
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    summary = {name: {k: run[k] for k in ("variant", "seed", "budget", "dir", "steps", "tokens_seen", "tokens_per_s",
                                          "curve")} | {"final": {str(m): r for m, r in run["final"].items()}}
               for name, run in runs.items()}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return by_budget, labels


SEED_STYLES = ["o-", "s--", "^:", "d-."]  # a run's seed, by its rank among the seeds of the report


def plot_title(meta, budget):
    """What the figure compares: the config (and the comparison's own --set) and the budget."""
    config = meta.get("config") or "the config"
    sets = f" {meta['sets']}" if meta.get("sets") else ""
    steps = f"{budget} steps" if budget else f"the config's train.steps"
    return (f"{config}{sets}, each variant trained {steps}:\n"
            "validation MLM loss and accuracy (masked at eval.mask_prob), one line per run")


def plot(out_dir, meta, by_budget, labels):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    budgets = list(by_budget)
    seeds = sorted({run["seed"] for b in budgets for g in by_budget[b].values() for run in g})
    style = {seed: SEED_STYLES[i % len(SEED_STYLES)] for i, seed in enumerate(seeds)}
    fig, axes = plt.subplots(len(budgets), 2, figsize=(12, 4.6 * len(budgets)), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {v: colors[i % len(colors)] for i, v in enumerate(labels)}
    for row, b in enumerate(budgets):
        for v, group in by_budget[b].items():
            for run in group:
                steps = [p[0] for p in run["curve"]]
                for col, field in ((0, 1), (1, 2)):
                    axes[row][col].plot(steps, [p[field] for p in run["curve"]], style[run["seed"]], ms=3,
                                        color=color[v], alpha=0.85)
        axes[row][0].set_ylabel("validation MLM loss")
        axes[row][1].set_ylabel("validation MLM accuracy")
        # One legend entry per variant (its colour) and per seed (its line style), not per run.
        handles = [Line2D([], [], color=color[v], label=labels[v]) for v in by_budget[b]]
        if len(seeds) > 1:
            handles += [Line2D([], [], color="grey", linestyle=style[s][1:], marker=style[s][0], ms=3,
                               label=f"seed {s}") for s in seeds]
        axes[row][0].set_title(plot_title(meta, b), fontsize=9, loc="left")
        for ax in axes[row]:
            ax.set_xlabel("step")
            ax.grid(alpha=0.3)
            ax.legend(handles=handles, fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "curves.png"), dpi=110)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    out_dir = sys.argv[1]
    meta, runs = load(out_dir)
    by_budget, labels = write_report(out_dir, meta, runs)
    plot(out_dir, meta, by_budget, labels)
    print(open(os.path.join(out_dir, "results.md")).read())
    print(f"wrote {out_dir}/results.md, results.json, curves.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
