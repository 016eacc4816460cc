#!/usr/bin/env python3
"""Where the time of a training step goes, from a Chrome trace written by `roformer bench --profile`.

Usage: scripts/profile_summary.py TRACE.json [--steps N] [--top K]

Device kernels (CUDA traces) are grouped into GEMM, attention, normalization, element-wise,
optimizer, reductions/loss, embedding/indexing and copies; the table gives milliseconds per step,
the share of kernel time, and the kernel count. "Host gap" is the wall time of the profiled window
in which no kernel ran (the GPU waited for the host). On a CPU trace the host operators are grouped
instead (aten:: ops, self time not separable here: top-level ops by total time).
"""
import argparse
import json
import re
from collections import defaultdict

CATEGORIES = [  # first match wins; patterns are matched against the lower-cased kernel name
    ("attention", r"flash|fmha|attention|sdpa|cudnn.*(mha|sdp)|_efficient_attention"),
    ("optimizer", r"adam|multi_tensor|foreach|fused_optimizer"),
    ("GEMM", r"gemm|cutlass|sm90_xmma|xmma|cublas|nvjet|matmul|wgmma|ampere_.*_s\d+|sm80_"),
    ("normalization", r"layer_norm|layernorm|rms_norm"),
    ("loss/softmax", r"softmax|nll|cross_entropy|log_softmax"),
    ("embedding/indexing", r"embedding|index|gather|scatter|masked"),
    ("reduction", r"reduce|norm_kernel|sum_kernel|amax|aminmax"),
    ("dropout/random", r"dropout|fused_dropout|philox|bernoulli|random"),
    ("copy/cast", r"copy|memcpy|memset|(?<!no)cast|fill"),
    ("element-wise", r"elementwise|vectorized|unrolled|pointwise|gelu|act|mul|add|triton"),
]


def category(name):
    low = name.lower()
    for cat, pattern in CATEGORIES:
        if re.search(pattern, low):
            return cat
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=None, help="steps in the trace (default: from the ProfilerStep count or 3)")
    ap.add_argument("--top", type=int, default=15, help="kernels listed by total time")
    args = ap.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    steps = args.steps or 3
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if kernels:
        per_cat = defaultdict(lambda: [0.0, 0])
        per_name = defaultdict(lambda: [0.0, 0])
        for e in kernels:
            c = per_cat[category(e["name"])]
            c[0] += e["dur"]
            c[1] += 1
            n = per_name[e["name"][:110]]
            n[0] += e["dur"]
            n[1] += 1
        total = sum(v[0] for v in per_cat.values())
        start = min(e["ts"] for e in kernels)
        end = max(e["ts"] + e["dur"] for e in kernels)
        # Busy time = union of kernel intervals (kernels on several streams may overlap).
        busy, cur_s, cur_e = 0.0, None, None
        for s, d in sorted((e["ts"], e["dur"]) for e in kernels):
            if cur_e is None or s > cur_e:
                if cur_e is not None:
                    busy += cur_e - cur_s
                cur_s, cur_e = s, s + d
            else:
                cur_e = max(cur_e, s + d)
        busy += cur_e - cur_s
        window = end - start
        print(f"profile: {args.trace}: {len(kernels)} device events over {steps} step(s), "
              f"{window / 1000 / steps:.2f} ms/step of wall time from first to last kernel\n")
        print("| category | ms/step | share of kernel time | kernels/step |\n|---|---:|---:|---:|")
        for cat, (dur, cnt) in sorted(per_cat.items(), key=lambda kv: -kv[1][0]):
            print(f"| {cat} | {dur / 1000 / steps:.2f} | {100 * dur / total:.1f}% | {cnt / steps:.0f} |")
        print(f"| **all kernels** | {total / 1000 / steps:.2f} | 100% | {len(kernels) / steps:.0f} |")
        print(f"| host gap (GPU idle inside the window) | {(window - busy) / 1000 / steps:.2f} | "
              f"{100 * (window - busy) / window:.1f}% of wall | |")
        # Which host operator launched the kernels: a kernel's "External id" is that of the
        # innermost cpu_op active at its launch.
        op_name = {e["args"]["External id"]: e["name"] for e in events
                   if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
        per_op = defaultdict(lambda: [0.0, 0])
        for e in kernels:
            o = per_op[op_name.get(e.get("args", {}).get("External id"), "(no host op)")]
            o[0] += e["dur"]
            o[1] += 1
        print(f"\nkernel time by the host operator that launched it (top {args.top}):\n\n"
              "| ms/step | kernels/step | operator |\n|---:|---:|---|")
        for name, (dur, cnt) in sorted(per_op.items(), key=lambda kv: -kv[1][0])[: args.top]:
            print(f"| {dur / 1000 / steps:.3f} | {cnt / steps:.0f} | `{name}` |")
        print(f"\ntop {args.top} kernels by time:\n\n| ms/step | calls/step | category | kernel |\n|---:|---:|---|---|")
        for name, (dur, cnt) in sorted(per_name.items(), key=lambda kv: -kv[1][0])[: args.top]:
            print(f"| {dur / 1000 / steps:.3f} | {cnt / steps:.0f} | {category(name)} | `{name}` |")
    else:
        ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
        per_name = defaultdict(lambda: [0.0, 0])
        for e in ops:
            n = per_name[e["name"]]
            n[0] += e["dur"]
            n[1] += 1
        print(f"profile: {args.trace}: no device kernels (CPU trace): {len(ops)} host ops over {steps} step(s)\n")
        print("| ms/step (total, nested included) | calls/step | op |\n|---:|---:|---|")
        for name, (dur, cnt) in sorted(per_name.items(), key=lambda kv: -kv[1][0])[: args.top]:
            print(f"| {dur / 1000 / steps:.2f} | {cnt / steps:.0f} | `{name}` |")


if __name__ == "__main__":
    main()
