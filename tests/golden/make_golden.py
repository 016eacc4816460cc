#!/usr/bin/env python3
"""Writes the golden fixtures for tests/unit/test_model_golden.cpp from Hugging Face transformers.

For each small random RoFormerForMaskedLM config, and each DebertaV2ForMaskedLM config with relative
attention (model.position: disentangled), (fixed seed, dropout 0) it runs fixed inputs that
include padding (attention_mask zeros, labels -100) and stores, in <name>.safetensors:
  weight/<hf key>   every state_dict tensor (tied keys included, and the sinusoidal table)
  input/input_ids, input/attention_mask, input/token_type_ids, input/labels   (int64)
  output/logits (B, T, V), output/loss ()
  grad/<hf key>     the gradient of every trainable parameter after loss.backward()
and, in the metadata, the versions used, the config fields, HF's parameter counts and the
state_dict key order (DeBERTa: our config overrides as `model_overrides`). deberta_buckets.safetensors
holds HF's make_log_bucket_position of every distance in [-2047, 2047] for a few (buckets,
max_relative_positions) pairs.

Usage (from the repository root):
  ~/.cache/roformer/venv-torch-2.11.0/bin/python tests/golden/make_golden.py
"""
import os

import torch
import transformers
from safetensors.torch import save_file
from transformers import DebertaV2Config, DebertaV2ForMaskedLM, RoFormerConfig, RoFormerForMaskedLM
from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position

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
# DeBERTa-v2/v3 relative attention with the legacy MLM head (cls.predictions, as ours). 12 tokens
# reach distance 11: buckets 8 keep |d| < 4 exact, log-bucket up to max_relative_positions and clamp
# beyond it.
DEBERTA_BASE = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                    max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    initializer_range=0.2, pad_token_id=0, layer_norm_eps=1e-7, relative_attention=True,
                    norm_rel_ebd="layer_norm", legacy=True)
# name -> (HF overrides, our hidden_act name, our model.* overrides)
DEBERTA_CONFIGS = {
    # DeBERTa-v3's form: shared position projections, both terms, no absolute input table.
    "deberta_shared": (dict(hidden_act="gelu", type_vocab_size=2, position_buckets=8, max_relative_positions=10,
                            pos_att_type=["p2c", "c2p"], share_att_key=True, position_biased_input=False), "gelu",
                       "position_buckets=8,max_relative_positions=10,pos_att_type=c2p+p2c,share_att_key=true,"
                       "position_biased_input=false,type_vocab_size=2"),
    # DeBERTa-v1's form: own projections, exact distances clamped at 8, the absolute table in the input.
    "deberta_separate": (dict(hidden_act="gelu_pytorch_tanh", type_vocab_size=0, position_buckets=-1,
                              max_relative_positions=8, pos_att_type=["c2p", "p2c"], share_att_key=False,
                              position_biased_input=True), "gelu_tanh",
                         "position_buckets=0,max_relative_positions=8,pos_att_type=c2p+p2c,share_att_key=false,"
                         "position_biased_input=true,type_vocab_size=0"),
    # One term each: c2p with its own key projection, p2c through the shared query projection.
    "deberta_c2p": (dict(hidden_act="relu", type_vocab_size=2, position_buckets=8, max_relative_positions=-1,
                         pos_att_type=["c2p"], share_att_key=False, position_biased_input=False), "relu",
                    "position_buckets=8,max_relative_positions=0,pos_att_type=c2p,share_att_key=false,"
                    "position_biased_input=false,type_vocab_size=2"),
    "deberta_p2c": (dict(hidden_act="gelu", type_vocab_size=2, position_buckets=6, max_relative_positions=9,
                         pos_att_type=["p2c"], share_att_key=True, position_biased_input=False), "gelu",
                    "position_buckets=6,max_relative_positions=9,pos_att_type=p2c,share_att_key=true,"
                    "position_biased_input=false,type_vocab_size=2"),
}
# (position_buckets, max_relative_positions): DeBERTa-v3's, the one docs/positions.md trains, the fixtures'.
BUCKET_PAIRS = [(256, 512), (64, 128), (8, 10), (8, 64), (6, 9)]


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


def run_model(model, config):
    """Runs the fixed inputs through a fresh model; returns (tensors, output)."""
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
    return tensors, out


def common_metadata(model, config, our_act, embedding_size, extra):
    """The metadata both families store; `extra` goes after initializer_range (the files' key order)."""
    return {
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "seed": "1234",
        "hf_config": config.to_json_string(use_diff=False),
        "vocab_size": str(config.vocab_size),
        "hidden_size": str(config.hidden_size),
        "num_layers": str(config.num_hidden_layers),
        "num_heads": str(config.num_attention_heads),
        "intermediate_size": str(config.intermediate_size),
        "embedding_size": str(embedding_size),
        "max_position_embeddings": str(config.max_position_embeddings),
        "type_vocab_size": str(config.type_vocab_size),
        "layer_norm_eps": repr(config.layer_norm_eps),
        "initializer_range": repr(config.initializer_range),
        **extra,
        "hidden_act": our_act,
        "hf_num_parameters": str(model.num_parameters()),
        "hf_num_trainable_parameters": str(model.num_parameters(only_trainable=True)),
        "state_dict_keys": ",".join(model.state_dict().keys()),
    }


def save(name, tensors, metadata, out):
    path = os.path.join(OUT, name + ".safetensors")
    save_file(tensors, path, metadata=metadata)
    print(f"{path}: {os.path.getsize(path)} bytes, loss {out.loss.item():.6f}, "
          f"params {metadata['hf_num_parameters']} (trainable {metadata['hf_num_trainable_parameters']})")


def main():
    for name, (overrides, our_act) in CONFIGS.items():
        torch.manual_seed(1234)
        config = RoFormerConfig(**BASE, **overrides)
        model = RoFormerForMaskedLM(config).float()
        tensors, out = run_model(model, config)
        metadata = common_metadata(model, config, our_act, config.embedding_size,
                                   {"rotary_value": "1" if config.rotary_value else "0"})
        save(name, tensors, metadata, out)

    for name, (overrides, our_act, ours) in DEBERTA_CONFIGS.items():
        torch.manual_seed(1234)
        config = DebertaV2Config(**DEBERTA_BASE, **overrides)
        model = DebertaV2ForMaskedLM(config).float()
        assert model.legacy, "the fixtures are for the legacy MLM head (cls.predictions), which roformer's is"
        tensors, out = run_model(model, config)
        metadata = common_metadata(model, config, our_act, config.hidden_size,
                                   {"model_overrides": "position=disentangled," + ours})
        save(name, tensors, metadata, out)

    distances = torch.arange(-2047, 2048, dtype=torch.long)
    buckets = {"distance": distances}
    for b, m in BUCKET_PAIRS:
        buckets[f"bucket/{b}_{m}"] = make_log_bucket_position(distances, b, m).to(torch.long).contiguous()
    path = os.path.join(OUT, "deberta_buckets.safetensors")
    save_file(buckets, path, metadata={"transformers_version": transformers.__version__})
    print(f"{path}: {len(BUCKET_PAIRS)} (buckets, max_relative_positions) pairs")


if __name__ == "__main__":
    main()
