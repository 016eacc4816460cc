#!/usr/bin/env python3
"""Writes the golden fixtures for tests/unit/test_model_golden.cpp from Hugging Face transformers.

For each small random RoFormerForMaskedLM config (fixed seed, dropout 0) it runs fixed inputs that
include padding (attention_mask zeros, labels -100) and stores, in <name>.safetensors:
  weight/<hf key>   every state_dict tensor (tied keys included, and the sinusoidal table)
  input/input_ids, input/attention_mask, input/token_type_ids, input/labels   (int64)
  output/logits (B, T, V), output/loss ()
  grad/<hf key>     the gradient of every trainable parameter after loss.backward()
and, in the metadata, the versions used, the config fields, HF's parameter counts and the
state_dict key order.

Usage (from the repository root):
  ~/.cache/roformer/venv-torch-2.11.0/bin/python tests/golden/make_golden.py
"""
import os

import torch
import transformers
from safetensors.torch import save_file
from transformers import RoFormerConfig, RoFormerForMaskedLM

OUT = os.path.dirname(os.path.abspath(__file__))
BATCH, SEQ = 3, 12
BASE = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, type_vocab_size=2, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, initializer_range=0.2, pad_token_id=0)
# name -> (HF overrides, our hidden_act name)
CONFIGS = {
    "roformer_post": (dict(hidden_act="gelu"), "gelu"),
    "roformer_factorized": (dict(embedding_size=16, hidden_act="gelu_pytorch_tanh"), "gelu_tanh"),
    "roformer_rotary_value": (dict(rotary_value=True, hidden_act="relu"), "relu"),
}


def make_inputs(vocab_size):
    g = torch.Generator().manual_seed(7)
    input_ids = torch.randint(1, vocab_size, (BATCH, SEQ), generator=g)
    attention_mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    attention_mask[1, -3:] = 0  # padding at the end of rows 1 and 2
    attention_mask[2, -5:] = 0
    input_ids[attention_mask == 0] = 0  # the pad token
    token_type_ids = torch.randint(0, 2, (BATCH, SEQ), generator=g)
    labels = torch.full((BATCH, SEQ), -100, dtype=torch.long)
    predict = (torch.rand(BATCH, SEQ, generator=g) < 0.35) & (attention_mask == 1)
    labels[predict] = torch.randint(1, vocab_size, (BATCH, SEQ), generator=g)[predict]
    return input_ids, attention_mask, token_type_ids, labels


def main():
    for name, (overrides, our_act) in CONFIGS.items():
        torch.manual_seed(1234)
        config = RoFormerConfig(**BASE, **overrides)
        model = RoFormerForMaskedLM(config).float()
        model.train()  # dropout is 0, so train mode is deterministic
        input_ids, attention_mask, token_type_ids, labels = make_inputs(config.vocab_size)
        out = model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels)
        out.loss.backward()

        tensors = {}
        for key, value in model.state_dict().items():
            tensors["weight/" + key] = value.detach().clone().contiguous()
        for key, param in model.named_parameters():
            if param.requires_grad:
                tensors["grad/" + key] = param.grad.detach().clone().contiguous()
        tensors["input/input_ids"] = input_ids
        tensors["input/attention_mask"] = attention_mask
        tensors["input/token_type_ids"] = token_type_ids
        tensors["input/labels"] = labels
        tensors["output/logits"] = out.logits.detach().contiguous()
        tensors["output/loss"] = out.loss.detach().reshape(())

        metadata = {
            "torch_version": torch.__version__,
            "transformers_version": transformers.__version__,
            "seed": "1234",
            "hf_config": config.to_json_string(use_diff=False),
            "vocab_size": str(config.vocab_size),
            "hidden_size": str(config.hidden_size),
            "num_layers": str(config.num_hidden_layers),
            "num_heads": str(config.num_attention_heads),
            "intermediate_size": str(config.intermediate_size),
            "embedding_size": str(config.embedding_size),
            "max_position_embeddings": str(config.max_position_embeddings),
            "type_vocab_size": str(config.type_vocab_size),
            "layer_norm_eps": repr(config.layer_norm_eps),
            "initializer_range": repr(config.initializer_range),
            "rotary_value": "1" if config.rotary_value else "0",
            "hidden_act": our_act,
            "hf_num_parameters": str(model.num_parameters()),
            "hf_num_trainable_parameters": str(model.num_parameters(only_trainable=True)),
            "state_dict_keys": ",".join(model.state_dict().keys()),
        }
        path = os.path.join(OUT, name + ".safetensors")
        save_file(tensors, path, metadata=metadata)
        print(f"{path}: {os.path.getsize(path)} bytes, loss {out.loss.item():.6f}, "
              f"params {metadata['hf_num_parameters']} (trainable {metadata['hf_num_trainable_parameters']})")


if __name__ == "__main__":
    main()
