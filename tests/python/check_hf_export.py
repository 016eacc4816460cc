#!/usr/bin/env python3
"""Checks a `roformer export --format hf` directory with Hugging Face transformers.

usage: check_hf_export.py EXPORT_DIR REFERENCE.safetensors [TOLERANCE]
REFERENCE holds input_ids (B, T), attention_mask (B, T) and logits (B, T, V) computed by the C++
model. Loads the export with AutoModelForMaskedLM.from_pretrained (RoFormerForMaskedLM,
BertForMaskedLM for a model with learned absolute positions, DebertaV2ForMaskedLM for disentangled
attention), requires no missing or unexpected keys, runs the same inputs and compares logits
(float32, max abs diff <= TOLERANCE, default 1e-4, where the mask is 1). Exit 0 when they match;
prints the figures either way.
"""
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForMaskedLM


def main() -> int:
    export_dir, reference = sys.argv[1], sys.argv[2]
    tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
    model, info = AutoModelForMaskedLM.from_pretrained(export_dir, output_loading_info=True)
    model.eval()
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if problems:
        print(f"loading problems: {problems}")
        return 1
    ref = load_file(reference)
    with torch.no_grad():
        logits = model(input_ids=ref["input_ids"], attention_mask=ref["attention_mask"]).logits
    mask = ref["attention_mask"].bool()
    diff = (logits - ref["logits"]).abs()[mask].max().item()
    scale = ref["logits"].abs().max().item()
    print(f"max |hf - ours| = {diff:.3e} (tolerance {tolerance:g}; max |logit| {scale:.3f}); transformers' {type(model).__name__} loaded with "
          "no missing/unexpected keys")
    return 0 if diff <= tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
