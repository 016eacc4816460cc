#!/usr/bin/env python3
"""Training throughput of `roformer bench` vs Hugging Face transformers, alternating in one run.

The baseline is what a Python user would write: transformers' RoFormerForMaskedLM built from the
same resolved config (`roformer config print`), torch.optim.AdamW with the usual two parameter
groups (no decay on biases and LayerNorm weights), gradient clipping as HF's Trainer does it,
DataCollatorForLanguageModeling's masking (15% of the non-special tokens; 80% [MASK], 10% random,
10% kept), model.train(), loss.backward(), optimizer.step(), zero_grad(set_to_none=True), and
torch.autocast for bf16. `--compile` adds a second baseline, the same loop with the model wrapped in
torch.compile (what a careful Python user would run; its compilation falls in the warm-up steps, which
are not timed); the ratio against each baseline is reported. Both sides train on random token batches ([CLS] ids [SEP], no padding) of
the same batch size, sequence length, precision and thread count; `roformer bench --synthetic`
masks exactly round(0.15 (T - 2)) positions per sequence, the collator ~15% on average.

tokens/s counts input tokens of whole steps, batch preparation included, on both sides. Rounds
alternate (HF, then roformer), so drifting machine load hits both; the ratio is of the medians.

  scripts/bench_vs_hf.py -c configs/tiny.yaml --set train.device=cpu --threads 2 --rounds 3
"""
import argparse
import gc
import json
import statistics
import subprocess
import sys
import time

import torch
import yaml

SPECIAL = 5  # [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4
CLS, SEP, MASK = 2, 3, 4


def resolved_config(binary, config, overrides):
    cmd = [binary, "config", "print", "-c", config]
    for o in overrides:
        cmd += ["--set", o]
    cfg = yaml.safe_load(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    # PyYAML (YAML 1.1) reads exponents without a dot, such as 1e-12, as strings.
    for section in cfg.values():
        for key, value in section.items():
            if isinstance(value, str):
                try:
                    section[key] = float(value)
                except ValueError:
                    pass
    return cfg


def hf_model(cfg, vocab):
    from transformers import RoFormerConfig, RoFormerForMaskedLM

    m = cfg["model"]
    if m["norm"] != "post" or m["attention"] != "softmax":
        sys.exit(f"transformers' RoFormer has post-LN softmax attention only (config: norm {m['norm']}, "
                 f"attention {m['attention']})")
    act = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu"}[m["hidden_act"]]
    hf_cfg = RoFormerConfig(
        vocab_size=vocab, hidden_size=m["hidden_size"], num_hidden_layers=m["num_layers"],
        num_attention_heads=m["num_heads"], intermediate_size=m["intermediate_size"],
        embedding_size=m["embedding_size"] or m["hidden_size"],
        max_position_embeddings=m["max_position_embeddings"], type_vocab_size=max(1, m["type_vocab_size"]),
        hidden_dropout_prob=m["hidden_dropout"], attention_probs_dropout_prob=m["attention_dropout"],
        layer_norm_eps=m["layer_norm_eps"], initializer_range=m["initializer_range"],
        rotary_value=m["rotary_value"], hidden_act=act, pad_token_id=0)
    return RoFormerForMaskedLM(hf_cfg)


def collate(batch, seq, vocab, gen, device):
    """Random sequences, then DataCollatorForLanguageModeling.torch_mask_tokens (mlm_probability 0.15)."""
    ids = torch.randint(SPECIAL, vocab, (batch, seq), generator=gen)
    ids[:, 0], ids[:, -1] = CLS, SEP
    labels = ids.clone()
    prob = torch.full(labels.shape, 0.15)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    prob.masked_fill_(special, 0.0)
    masked = torch.bernoulli(prob, generator=gen).bool()
    labels[~masked] = -100
    replaced = torch.bernoulli(torch.full(labels.shape, 0.8), generator=gen).bool() & masked
    ids[replaced] = MASK
    rand = torch.bernoulli(torch.full(labels.shape, 0.5), generator=gen).bool() & masked & ~replaced
    ids[rand] = torch.randint(SPECIAL, vocab, labels.shape, generator=gen)[rand]
    attention = torch.ones_like(ids)
    pin = device.type == "cuda"
    to = lambda t: (t.pin_memory() if pin else t).to(device, non_blocking=pin)
    return to(ids), to(attention), to(labels)


def run_hf(cfg, vocab, steps, warmup, device, compile_model=False):
    torch.manual_seed(cfg["train"]["seed"])
    model = hf_model(cfg, vocab).to(device)
    model.train()
    forward = torch.compile(model) if compile_model else model
    o = cfg["optimizer"]
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or "LayerNorm" in name or "embeddings" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])
    B, T = cfg["train"]["batch_size"], cfg["data"]["max_seq_len"]
    bf16 = cfg["train"]["precision"] == "bf16"
    gen = torch.Generator().manual_seed(0)

    def step():
        ids, attention, labels = collate(B, T, vocab, gen, device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = forward(input_ids=ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        if o["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    graphs = compiled_graphs()
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    last = loss.item()  # also waits for the device
    seconds = time.perf_counter() - start
    result = {"tokens_per_s": B * T * steps / seconds, "ms_per_step": 1000 * seconds / steps, "final_loss": last}
    if compile_model:  # a compilation inside the timed steps would make the row meaningless: say so
        result["graphs_compiled_while_timed"] = compiled_graphs() - graphs
    return result


def compiled_graphs():
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def run_roformer(binary, config, overrides, steps, warmup, extra):
    cmd = [binary, "bench", "-c", config, "--synthetic", "--json", "--steps", str(steps), "--warmup", str(warmup)]
    for o in overrides:
        cmd += ["--set", o]
    out = subprocess.run(cmd + extra, check=True, capture_output=True, text=True).stdout
    return json.loads([line for line in out.splitlines() if line.startswith("{")][-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-c", "--config", required=True)
    ap.add_argument("--set", action="append", default=[], help="config override section.key=value (repeatable)")
    ap.add_argument("--roformer", default="build/roformer", help="the roformer binary")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads for both (0: leave the defaults)")
    ap.add_argument("--bench-arg", action="append", default=[], help="extra argument for roformer bench")
    ap.add_argument("--compile", action="store_true", help="also time HF with torch.compile (a second baseline)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    overrides = list(args.set)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
        overrides.append(f"train.num_threads={args.threads}")
    cfg = resolved_config(args.roformer, args.config, overrides)
    vocab = cfg["model"]["vocab_size"] or cfg["tokenizer"]["vocab_size"]
    overrides.append(f"model.vocab_size={vocab}")  # roformer bench --synthetic needs it
    cfg["model"]["vocab_size"] = vocab
    dev = cfg["train"]["device"]
    device = torch.device("cuda" if dev == "auto" and torch.cuda.is_available() else ("cpu" if dev == "auto" else dev))
    if cfg["train"]["grad_accum"] != 1:
        sys.exit("set train.grad_accum=1: the baseline runs one micro-batch per step")
    print(f"# B={cfg['train']['batch_size']} T={cfg['data']['max_seq_len']} V={vocab} H={cfg['model']['hidden_size']} "
          f"L={cfg['model']['num_layers']} precision={cfg['train']['precision']} device={device} "
          f"threads={torch.get_num_threads() if device.type == 'cpu' else '-'} torch={torch.__version__}", flush=True)
    hf, hf_compiled, ours = [], [], []

    def release():  # hand the baseline's cached blocks back before the next side runs
        if device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()

    for r in range(args.rounds):
        h = run_hf(cfg, vocab, args.steps, args.warmup, device)
        release()
        line = f"round {r + 1}: HF {h['tokens_per_s']:.0f} tokens/s ({h['ms_per_step']:.1f} ms/step, loss {h['final_loss']:.3f})"
        if args.compile:
            try:
                hc = run_hf(cfg, vocab, args.steps, args.warmup, device, compile_model=True)
            except Exception as e:  # torch.compile needs a working compiler toolchain; the eager rows still count
                print(f"HF compiled failed ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                      "continuing without that baseline", flush=True)
                args.compile = False
            else:
                hf_compiled.append(hc)
                line += f" | HF compiled {hc['tokens_per_s']:.0f} tokens/s ({hc['ms_per_step']:.1f} ms/step"
                line += f", {hc['graphs_compiled_while_timed']} graphs compiled while timed)"
            release()
        o = run_roformer(args.roformer, args.config, overrides, args.steps, args.warmup, args.bench_arg)
        hf.append(h)
        ours.append(o)
        print(f"{line} | roformer {o['tokens_per_s']:.0f} tokens/s ({o['ms_per_step_mean']:.1f} ms/step, loss "
              f"{o['final_loss']:.3f})", flush=True)
    hf_med = statistics.median(x["tokens_per_s"] for x in hf)
    our_med = statistics.median(x["tokens_per_s"] for x in ours)
    print(f"median tokens/s: HF {hf_med:.0f} | roformer {our_med:.0f} | ratio roformer/HF {our_med / hf_med:.2f}x")
    compiled_med = statistics.median(x["tokens_per_s"] for x in hf_compiled) if hf_compiled else None
    if compiled_med:
        print(f"median tokens/s: HF compiled {compiled_med:.0f} | ratio roformer/HF compiled {our_med / compiled_med:.2f}x")
    if ours[-1].get("mfu") is not None:
        print(f"roformer MFU {100 * statistics.median(x['mfu'] for x in ours):.1f}% "
              f"(peak {ours[-1]['peak_tflops']} TFLOP/s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": args.config, "overrides": overrides, "hf": hf, "roformer": ours,
                       "ratio": our_med / hf_med, "hf_compiled": hf_compiled,
                       "ratio_compiled": our_med / compiled_med if compiled_med else None}, f, indent=1)


if __name__ == "__main__":
    main()
