#!/usr/bin/env python3
"""Trains tokenizers with Hugging Face `tokenizers` and writes the ids it gives, for roformer's tokenizer.json reader.

usage: hf_tokenizer_reference.py OUT_DIR TRAIN.txt TEXTS.json [TOKENIZER_DIR ...]

Trains, on TRAIN.txt (one paragraph a line), the tokenizers real encoders use and variants that put
every component and option roformer implements to work, each written as OUT_DIR/<name>/tokenizer.json
(with a special_tokens_map.json where the real ones have it):

  wordpiece-uncased, wordpiece-cased   BERT: BertNormalizer, BertPreTokenizer, WordPiece, BertProcessing
  bpe-roberta                          RoBERTa: ByteLevel (GPT-2's pattern), BPE, RobertaProcessing, <mask> lstrip
  bpe-modernbert                       ModernBERT: NFC, ByteLevel, BPE, TemplateProcessing [CLS] $A [SEP],
                                       added tokens for runs of spaces (normalized) and |||EMAIL_ADDRESS|||-style ones
  unigram-metaspace                    DeBERTa-v3/XLM-R style: NFKC and a Replace, Metaspace, Unigram, [CLS] $A [SEP]
  and the variants wp-*, bpe-*, uni-* (components swapped on the trained models)

Each TOKENIZER_DIR given (e.g. a `roformer export` directory) is used as it is, under its folder name.
TEXTS.json is {"texts": [...], "ordinary": N, "every_text": [names]}: every tokenizer encodes the first
N texts, those named in every_text all of them (the rest cover every code point). Writes, for each
tokenizer, OUT_DIR/<name>.ids: for each text it encodes, little-endian int32 count and ids of
encode(text, add_special_tokens=False), then the same with add_special_tokens=True; truncation and
padding off. Prints the names, one a line. Nothing is downloaded.
"""
import array
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def save(tok: Tokenizer, out_dir: str, name: str, specials: dict = None) -> None:
    path = os.path.join(out_dir, name)
    os.makedirs(path, exist_ok=True)
    tok.save(os.path.join(path, "tokenizer.json"))
    if specials:
        with open(os.path.join(path, "special_tokens_map.json"), "w", encoding="utf-8") as f:
            json.dump(specials, f)


def wordpiece(lines, lowercase: bool) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(lines, trainers.WordPieceTrainer(vocab_size=3000, special_tokens=specials,
                                                             show_progress=False))
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def byte_level_bpe(lines, specials, normalizer=None, **bpe) -> Tokenizer:
    tok = Tokenizer(models.BPE(**bpe))
    if normalizer:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=3000, special_tokens=specials, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def roberta(lines) -> Tokenizer:
    specials = ["<s>", "<pad>", "</s>", "<unk>", AddedToken("<mask>", lstrip=True, special=True, normalized=False)]
    tok = byte_level_bpe(lines, specials)
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")),
                                                      trim_offsets=True, add_prefix_space=False)
    return tok


def modernbert(lines) -> Tokenizer:
    tok = byte_level_bpe(lines, ["|||IP_ADDRESS|||", "<|padding|>", "<|endoftext|>"], normalizers.NFC())
    # GPT-NeoX's runs of spaces, matched in the normalized text; OLMo's PII placeholders.
    tok.add_tokens([AddedToken(" " * n, normalized=True) for n in range(2, 25)])
    tok.add_tokens([AddedToken("|||EMAIL_ADDRESS|||", normalized=True), AddedToken("|||PHONE_NUMBER|||", normalized=True)])
    tok.add_special_tokens([AddedToken("[UNK]", special=True, normalized=False), AddedToken("[CLS]", special=True, normalized=False),
                            AddedToken("[SEP]", special=True, normalized=False), AddedToken("[PAD]", special=True, normalized=False),
                            AddedToken("[MASK]", lstrip=True, special=True, normalized=False)])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok


def unigram(lines) -> Tokenizer:
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    tok.train_from_iterator(lines, trainers.UnigramTrainer(vocab_size=3000, special_tokens=specials, unk_token="[UNK]",
                                                           show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok


def variants(base: dict) -> dict:
    """The trained models with other components: every normalizer, pre-tokenizer and option roformer implements."""
    out = {}

    def variant(name, source, **parts):
        tok = Tokenizer.from_str(base[source].to_str())
        for key, value in parts.items():
            setattr(tok, key, value)
        out[name] = tok
        return tok

    # WordPiece with other normalizers and pre-tokenizers.
    variant("wp-nfd-strip", "wordpiece-cased",
            normalizer=normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
                                             normalizers.Strip(left=True, right=True)]),
            pre_tokenizer=pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                   pre_tokenizers.Punctuation(behavior="isolated"),
                                                   pre_tokenizers.Digits(individual_digits=True)]))
    variant("wp-nfkc-merged", "wordpiece-uncased",
            normalizer=normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(),
                                             normalizers.Replace("''", '"'), normalizers.Strip(left=True, right=False)]),
            pre_tokenizer=pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                   pre_tokenizers.Punctuation(behavior="merged_with_previous"),
                                                   pre_tokenizers.Digits(individual_digits=False)]))
    variant("wp-nfkd-split", "wordpiece-uncased",
            normalizer=normalizers.Sequence([normalizers.NFKD(),
                                             normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                                                        strip_accents=True, lowercase=True)]),
            pre_tokenizer=pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(r"\s+"), behavior="removed"),
                pre_tokenizers.Split(Regex(r"[\p{P}\p{S}]"), behavior="merged_with_next"),
                pre_tokenizers.Split("-", behavior="contiguous"),
                pre_tokenizers.Split(Regex(r"\d+|\w+"), behavior="isolated", invert=True),
                pre_tokenizers.CharDelimiterSplit("x")]))
    tok = variant("wp-added", "wordpiece-uncased")
    tok.add_tokens([AddedToken("new york", single_word=True, normalized=True), AddedToken("ab", single_word=False),
                    AddedToken("[X]", lstrip=True, rstrip=True, normalized=False),
                    AddedToken("Grand", single_word=True, normalized=False)])
    tok.add_special_tokens([AddedToken("<eos>", special=True, rstrip=True)])
    # BPE: Llama-3's split with a byte-level alphabet, and a character BPE with every option.
    variant("bpe-split-bytelevel", "bpe-roberta",
            pre_tokenizer=pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
                                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    variant("bpe-prefix-space", "bpe-roberta",
            normalizer=normalizers.Sequence([normalizers.Prepend("x"), normalizers.NFKC()]),
            pre_tokenizer=pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True))
    # Unigram with Metaspace's other schemes and the legacy Llama normalizer.
    variant("uni-first", "unigram-metaspace",
            pre_tokenizer=pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False))
    variant("uni-never-legacy", "unigram-metaspace",
            normalizer=normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]),
            pre_tokenizer=pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="never", split=True))
    return out


def char_bpe(lines) -> Tokenizer:
    """A BPE over characters with a continuation prefix, an end-of-word suffix, [UNK] fused, byte fallback."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>",
                               fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.BPEDecoder(suffix="</w>")])
    bytes_tokens = [f"<0x{b:02X}>" for b in range(256) if b < 0x80]  # ASCII bytes only: the rest is [UNK]
    tok.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=2000, special_tokens=["[UNK]", "[CLS]", "[SEP]",
                                                                                       "[PAD]", "[MASK]"] + bytes_tokens,
                                                       continuing_subword_prefix="##", end_of_word_suffix="</w>",
                                                       limit_alphabet=200, show_progress=False))
    return tok


def main() -> int:
    out_dir, train_path, texts_path = sys.argv[1:4]
    with open(train_path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    with open(texts_path, encoding="utf-8") as f:
        request = json.load(f)
    texts, ordinary, every_text = request["texts"], request["ordinary"], set(request["every_text"])
    base = {"wordpiece-uncased": wordpiece(lines, True), "wordpiece-cased": wordpiece(lines, False),
            "bpe-roberta": roberta(lines), "bpe-modernbert": modernbert(lines), "unigram-metaspace": unigram(lines),
            "bpe-char": char_bpe(lines)}
    tokenizers = dict(base, **variants(base))
    maps = {"bpe-roberta": {"cls_token": "<s>", "sep_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
                            "mask_token": {"content": "<mask>", "lstrip": True}}}
    for name, tok in tokenizers.items():
        save(tok, out_dir, name, maps.get(name))
    for path in sys.argv[4:]:
        tokenizers[os.path.basename(os.path.normpath(path))] = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    for name, tok in tokenizers.items():
        tok.no_truncation()
        tok.no_padding()
        mine = texts if name in every_text else texts[:ordinary]
        out = array.array("i")
        for add in (False, True):
            for e in tok.encode_batch(mine, add_special_tokens=add):
                out.append(len(e.ids))
                out.extend(e.ids)
        if sys.byteorder != "little":
            out.byteswap()
        with open(os.path.join(out_dir, name + ".ids"), "wb") as f:
            out.tofile(f)
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
