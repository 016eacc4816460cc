#!/usr/bin/env python3
"""Makes, with transformers and tokenizers themselves, a tiny released-style model directory as
save_pretrained leaves it (config.json, model.safetensors, tokenizer.json, tokenizer_config.json),
for roformer's --init-from tests (issue 54). Nothing is downloaded.

usage: make_released_model.py FAMILY OUT_DIR TRAIN.txt
  FAMILY  bert              BertForMaskedLM, uncased WordPiece (BertNormalizer, BertPreTokenizer,
                            [PAD] [UNK] [CLS] [SEP] [MASK] = 0-4), 1000 ids
          bert-pretraining  the same as BertForPreTraining: its pooler and next-sentence head too
The model: hidden 64, 2 layers, 2 heads, intermediate 128, 128 positions, random weights (seed 0).
Prints the model keys a roformer config needs, as --set arguments, on one line.
"""
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import BertConfig, BertForMaskedLM, BertForPreTraining, PreTrainedTokenizerFast


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


def main() -> int:
    family, out, train = sys.argv[1], sys.argv[2], sys.argv[3]
    if family not in ("bert", "bert-pretraining"):
        print(f"unknown family {family}", file=sys.stderr)
        return 1
    with open(train, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
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
