#!/usr/bin/env python3
"""Makes a tiny random ModernBertForMaskedLM with transformers and its reference outputs, for
tests/unit/test_model_golden.cpp (ModernBertGolden). No network: the model is built from a config.

usage: make_modernbert_reference.py OUT_DIR VARIANT
VARIANT: plain (ModernBERT's settings: no biases, global layers 0 and 3 of 4 at rotary base 160000,
local ones at 10000) or biased (every bias, tanh GELU, a global layer every 2, one rotary base).
Writes OUT_DIR/hf (save_pretrained: config.json, model.safetensors) and OUT_DIR/reference.safetensors:
  input/input_ids, input/attention_mask, input/labels   (B, T) int64, for T = 20 (beyond the window of
                                                          +-4) as T20, and T = 5 (within it) as T5
  output/logits_T (B, T, V), output/loss_T ()
  grad/<hf key>_T20  the gradient of every parameter after loss.backward() at T = 20
Every parameter is perturbed from its initialization (norms and biases included) so that none is
trivially 1 or 0.
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import ModernBertConfig, ModernBertForMaskedLM

VARIANTS = {
    "plain": dict(hidden_activation="gelu", classifier_activation="gelu", global_attn_every_n_layers=3,
                  global_rope_theta=160000.0, local_rope_theta=10000.0),
    "biased": dict(hidden_activation="gelu_pytorch_tanh", classifier_activation="gelu_pytorch_tanh",
                   global_attn_every_n_layers=2, global_rope_theta=10000.0, local_rope_theta=10000.0,
                   norm_bias=True, attention_bias=True, mlp_bias=True, classifier_bias=True),
}


def main() -> int:
    out, variant = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    config = ModernBertConfig(vocab_size=99, hidden_size=32, intermediate_size=24, num_hidden_layers=4,
                              num_attention_heads=4, max_position_embeddings=64, local_attention=8,
                              pad_token_id=0, bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3,
                              initializer_range=0.2, norm_eps=1e-5, attn_implementation="eager",
                              **VARIANTS[variant])
    model = ModernBertForMaskedLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(os.path.join(out, "hf"))
    model.train()  # dropout is 0: train mode only for the gradients

    g = torch.Generator().manual_seed(7)
    tensors = {}
    for T in (20, 5):
        ids = torch.randint(5, 99, (3, T), generator=g)
        mask = torch.ones(3, T, dtype=torch.long)
        mask[1, -(T // 3):] = 0  # padding at the end of rows 1 and 2
        mask[2, -(T // 2):] = 0
        ids[mask == 0] = 0
        labels = torch.full((3, T), -100, dtype=torch.long)
        chosen = (torch.rand(3, T, generator=g) < 0.4) & (mask == 1)
        chosen[0, 0] = True
        labels[chosen] = torch.randint(5, 99, (3, T), generator=g)[chosen]
        model.zero_grad()
        result = model(input_ids=ids, attention_mask=mask, labels=labels)
        result.loss.backward()
        tensors.update({f"input/input_ids_T{T}": ids, f"input/attention_mask_T{T}": mask,
                        f"input/labels_T{T}": labels, f"output/logits_T{T}": result.logits.detach().contiguous(),
                        f"output/loss_T{T}": result.loss.detach()})
        if T == 20:
            for name, p in model.named_parameters():
                tensors[f"grad/{name}"] = p.grad.detach().clone().contiguous()
    save_file(tensors, os.path.join(out, "reference.safetensors"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
