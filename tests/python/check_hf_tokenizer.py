#!/usr/bin/env python3
"""Checks the tokenizer of a `roformer export --format hf` directory against roformer's own ids.

usage: check_hf_tokenizer.py EXPORT_DIR CASES.json [CASES.json ...]
Each CASES.json is a list of {"text", "ids", "decoded"} written by the C++ test: "ids" are roformer's
ids for the text, [CLS] ... [SEP] included, and "decoded" roformer's decoding of the ids between
them. Loads AutoTokenizer.from_pretrained(EXPORT_DIR) with nothing beyond transformers (and its
tokenizers), requires a class other than RoFormerTokenizer and the five special tokens at ids 0-4,
then requires identical ids for every text, and the same decoded text for those without [UNK].
Prints one line per file, named by the file's stem ("web: identical ids for 400/400 texts; ...").
Exit 0 when everything matches; prints the first differences either way.
"""
import json
import os
import sys

from transformers import AutoTokenizer


def check(tok, label: str, cases: list) -> bool:
    bad_ids = bad_text = with_unk = 0
    for case in cases:
        ids = tok(case["text"])["input_ids"]
        if ids != case["ids"]:
            bad_ids += 1
            if bad_ids <= 5:
                print(f"{label}: ids differ for {case['text']!r}\n  roformer {case['ids']}\n  hf       {ids}")
            continue
        if 1 in ids:  # SentencePiece decodes [UNK] as " \u2047 ", Hugging Face drops it as a special token
            with_unk += 1
            continue
        decoded = tok.decode(ids, skip_special_tokens=True)
        if decoded != case["decoded"]:
            bad_text += 1
            if bad_text <= 5:
                print(f"{label}: decoding differs for {case['text']!r}\n  roformer {case['decoded']!r}\n"
                      f"  hf       {decoded!r}")
    n = len(cases)
    print(f"{label}: identical ids for {n - bad_ids}/{n} texts ({with_unk} with [UNK]); identical decoding for "
          f"{n - bad_ids - bad_text - with_unk}/{n - bad_ids - with_unk} texts without [UNK]")
    return bad_ids == 0 and bad_text == 0


def main() -> int:
    export_dir, case_paths = sys.argv[1], sys.argv[2:]
    tok = AutoTokenizer.from_pretrained(export_dir)
    name = type(tok).__name__
    if "RoFormer" in name:
        print(f"AutoTokenizer picked {name}, not the exported tokenizer.json")
        return 1
    specials = {t: tok.convert_tokens_to_ids(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    roles = (tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id)
    if list(specials.values()) != [0, 1, 2, 3, 4] or roles != (0, 1, 2, 3, 4):
        print(f"special tokens: {specials}, roles (pad, unk, cls, sep, mask) = {roles}; expected ids 0-4")
        return 1
    print(name)
    ok = True
    for path in case_paths:
        with open(path, encoding="utf-8") as f:
            ok &= check(tok, os.path.splitext(os.path.basename(path))[0], json.load(f))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
