#!/usr/bin/env python3
"""Compares pipeline("fill-mask") on a `roformer export --format hf` directory with `roformer fill-mask`.

usage: check_hf_fill_mask.py EXPORT_DIR FILL_MASK.jsonl TOLERANCE
FILL_MASK.jsonl holds the records of `roformer fill-mask --json --top-k 5` (one text, one [MASK]
each). For every text, pipeline("fill-mask", model=EXPORT_DIR) must return the same five token ids
in the same order, with probabilities within TOLERANCE (absolute) of roformer's.
Exit 0 when all match; prints the largest probability difference either way.
"""
import json
import sys

from transformers import pipeline


def main() -> int:
    export_dir, records_path, tolerance = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with open(records_path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.startswith("{")]
    if not records:
        print(f"no fill-mask records in {records_path}")
        return 1
    fill = pipeline("fill-mask", model=export_dir, device="cpu")
    worst, bad = 0.0, 0
    for rec in records:
        ours = rec["masks"][0]["predictions"]
        theirs = fill(rec["text"], top_k=len(ours))
        our_ids = [p["id"] for p in ours]
        hf_ids = [p["token"] for p in theirs]
        diffs = [abs(p["probability"] - q["score"]) for p, q in zip(ours, theirs)]
        worst = max(worst, max(diffs))
        if our_ids != hf_ids or max(diffs) > tolerance:
            bad += 1
            print(f"{rec['text']!r}\n  roformer {[(p['token'], round(p['probability'], 6)) for p in ours]}\n"
                  f"  hf       {[(p['token_str'], round(p['score'], 6)) for p in theirs]}")
    print(f"{type(fill.tokenizer).__name__}: same top-{len(records[0]['masks'][0]['predictions'])} tokens for "
          f"{len(records) - bad}/{len(records)} texts; max |p_hf - p_roformer| = {worst:.2e} (tolerance {tolerance:g})")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
