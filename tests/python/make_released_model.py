#!/usr/bin/env python3
"""Makes, with transformers and tokenizers themselves, a tiny released-style model directory as
save_pretrained leaves it (config.json, model.safetensors, tokenizer.json, tokenizer_config.json),
for roformer's --init-from tests (issue 54). Nothing is downloaded.

usage: make_released_model.py FAMILY OUT_DIR TRAIN.txt
  FAMILY  bert              BertForMaskedLM, uncased WordPiece (BertNormalizer, BertPreTokenizer,
                            [PAD] [UNK] [CLS] [SEP] [MASK] = 0-4), 1000 ids
          bert-pretraining  the same as BertForPreTraining: its pooler and next-sentence head too
          roberta           RobertaForMaskedLM, byte-level BPE (<s> <pad> </s> <unk> = 0-3, <mask>
                            last, lstrip), RobertaProcessing, 1000 ids; 130 position rows (the
                            first two the pad's), one token type, pad_token_id 1
          deberta-v3        DebertaV2ForMaskedLM with v3's settings (relative attention, share_att_key,
                            position_buckets 16, norm_rel_ebd layer_norm, no absolute positions, no
                            token types), Unigram with Metaspace ([PAD] [CLS] [SEP] [UNK] = 0-3,
                            [MASK] last, as v3's spm.model and added token), legacy head
          deberta-v3-rtd    the same saved as v3's released checkpoints are: no MLM head, a
                            replaced-token-detection head (mask_predictions.*) instead, the
                            embedding padded 24 rows beyond the tokenizer's ids
          modernbert        ModernBertForMaskedLM: 3 layers (layer 1 local within +-4), rotary bases
                            160000 / 10000, byte-level BPE with ModernBERT's specials after the
                            vocabulary ([UNK] [CLS] [SEP] [PAD] [MASK])
The model: hidden 64, 2 layers, 2 heads, intermediate 128, 128 positions, random weights (seed 0).
Prints the model keys a roformer config needs, as --set arguments, on one line.
"""
import os
import sys

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from safetensors.torch import load_file, save_file
from transformers import (BertConfig, BertForMaskedLM, BertForPreTraining, DebertaV2Config, DebertaV2ForMaskedLM,
                          ModernBertConfig, ModernBertForMaskedLM, PreTrainedTokenizerFast, RobertaConfig,
                          RobertaForMaskedLM)


def wordpiece(lines) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(
        vocab_size=1000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def byte_level_bpe(lines) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=999, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    return tok


def roberta(lines, out) -> None:
    tok = byte_level_bpe(lines)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", cls_token="<s>", sep_token="</s>", mask_token="<mask>")
    config = RobertaConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=128, max_position_embeddings=130,
                           type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5)
    torch.manual_seed(0)
    model = RobertaForMaskedLM(config)
    with torch.no_grad():  # a released model's trained rows, not the initializer's zero pad row only
        model.roberta.embeddings.token_type_embeddings.weight.normal_(0, 0.02)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    print(f"--set model.position=absolute --set model.family=roberta --set model.hidden_size=64 "
          f"--set model.num_layers=2 --set model.num_heads=2 --set model.intermediate_size=128 "
          f"--set model.max_position_embeddings=128 --set model.type_vocab_size=1 --set model.layer_norm_eps=1e-05 "
          f"--set model.vocab_size={tok.get_vocab_size()}")


def unigram_v3(lines) -> Tokenizer:
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.Replace("``", '"'), normalizers.Replace("''", '"')])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.train_from_iterator(lines, trainers.UnigramTrainer(
        vocab_size=999, special_tokens=["[PAD]", "[CLS]", "[SEP]", "[UNK]"], unk_token="[UNK]", show_progress=False))
    tok.add_special_tokens([AddedToken("[MASK]", special=True)])
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                       special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    return tok


def deberta_v3(lines, out, rtd) -> None:
    tok = unigram_v3(lines)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="[CLS]", eos_token="[SEP]", unk_token="[UNK]",
                                   pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    rows = tok.get_vocab_size() + (24 if rtd else 0)  # v3's releases: 128,100 rows for 128,001 ids
    config = DebertaV2Config(vocab_size=rows, hidden_size=64, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=128, max_position_embeddings=128,
                             relative_attention=True, position_buckets=16, max_relative_positions=-1,
                             pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True,
                             position_biased_input=False, type_vocab_size=0, layer_norm_eps=1e-7, pad_token_id=0,
                             hidden_act="gelu")
    torch.manual_seed(0)
    model = DebertaV2ForMaskedLM(config)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    if rtd:  # as v3's releases: the discriminator's head in place of the MLM head
        weights = load_file(os.path.join(out, "model.safetensors"))
        weights = {k: v for k, v in weights.items() if not k.startswith("cls.")}
        weights["mask_predictions.dense.weight"] = torch.randn(64, 64) * 0.02
        weights["mask_predictions.classifier.weight"] = torch.randn(1, 64) * 0.02
        save_file(weights, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    print(f"--set model.position=disentangled --set model.hidden_size=64 --set model.num_layers=2 "
          f"--set model.num_heads=2 --set model.intermediate_size=128 --set model.max_position_embeddings=128 "
          f"--set model.position_buckets=16 --set model.type_vocab_size=0 --set model.layer_norm_eps=1e-07 "
          f"--set model.vocab_size={tok.get_vocab_size()}")


def modernbert(lines, out) -> None:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(
        vocab_size=995, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.add_special_tokens([AddedToken(t, special=True) for t in ("[UNK]", "[CLS]", "[SEP]", "[PAD]")] +
                           [AddedToken("[MASK]", lstrip=True, special=True)])
    cls, sep, pad = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]"), tok.token_to_id("[PAD]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")
    config = ModernBertConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=96,
                              num_hidden_layers=3, num_attention_heads=2, max_position_embeddings=128,
                              local_attention=8, global_attn_every_n_layers=3, pad_token_id=pad, cls_token_id=cls,
                              sep_token_id=sep, bos_token_id=cls, eos_token_id=sep)
    torch.manual_seed(0)
    model = ModernBertForMaskedLM(config)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    print(f"--set model.position=rotary --set model.norm=pre --set model.first_attention_norm=false "
          f"--set model.feed_forward=glu --set model.bias=false --set model.type_vocab_size=0 "
          f"--set model.hidden_size=64 --set model.num_layers=3 --set model.num_heads=2 "
          f"--set model.intermediate_size=96 --set model.max_position_embeddings=128 --set model.local_attention=8 "
          f"--set model.global_attention_every=3 --set model.rotary_base=160000 --set model.local_rotary_base=10000 "
          f"--set model.layer_norm_eps=1e-05 --set model.hidden_dropout=0 --set model.attention_dropout=0 "
          f"--set model.vocab_size={tok.get_vocab_size()}")


def main() -> int:
    family, out, train = sys.argv[1], sys.argv[2], sys.argv[3]
    if family not in ("bert", "bert-pretraining", "roberta", "deberta-v3", "deberta-v3-rtd", "modernbert"):
        print(f"unknown family {family}", file=sys.stderr)
        return 1
    with open(train, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    if family == "roberta":
        roberta(lines, out)
        return 0
    if family.startswith("deberta-v3"):
        deberta_v3(lines, out, family == "deberta-v3-rtd")
        return 0
    if family == "modernbert":
        modernbert(lines, out)
        return 0
    tok = wordpiece(lines)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=128)
    torch.manual_seed(0)
    model = (BertForMaskedLM if family == "bert" else BertForPreTraining)(config)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    print(f"--set model.position=absolute --set model.hidden_size=64 --set model.num_layers=2 "
          f"--set model.num_heads=2 --set model.intermediate_size=128 --set model.max_position_embeddings=128 "
          f"--set model.vocab_size={tok.get_vocab_size()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
