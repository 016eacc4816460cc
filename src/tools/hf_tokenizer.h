// The tokenizer half of `roformer export --format hf`: tokenizer.json (a tokenizer.json tokenizer as
// it is; our SentencePiece model in the form of Hugging Face's `tokenizers` library),
// tokenizer_config.json and special_tokens_map.json, so that AutoTokenizer.from_pretrained(DIR) and
// pipeline("fill-mask") produce the ids roformer produces, with no package beyond transformers (and
// its tokenizers).
//
// tokenizer.json is built the way transformers' SpmConverter (convert_slow_tokenizer.py) builds
// it from a SentencePiece ModelProto, with the normalizer corrected where SpmConverter's gives other
// ids than SentencePiece (web-like text: zero-width joiners after no-break spaces, U+0085, ...):
//   normalizer     NFC (an NFKC table gives the same result on a text and its NFC form), a Replace
//                  that inserts a control character the table deletes where SentencePiece's match
//                  ends (Hugging Face's Precompiled maps whole grapheme clusters and drops what
//                  follows a match inside one), Precompiled(normalizer_spec.precompiled_charsmap) --
//                  the NFKC table SentencePiece applies --, then trailing spaces dropped and runs of
//                  spaces made one "▁" (remove_extra_whitespaces; not Strip, which also drops U+0085)
//   pre_tokenizer  Metaspace("▁", prepend_scheme always) (add_dummy_prefix; split on whitespace)
//   model          Unigram(pieces, scores, unk_id) or BPE(vocab, merges ranked by piece score)
//   added_tokens   the control pieces [PAD] [CLS] [SEP] [MASK] as special tokens
//   post_processor TemplateProcessing "[CLS] $A [SEP]" (pairs: "[CLS] $A [SEP] $B [SEP]")
//   decoder        Metaspace
// Still different (hf_tokenizer.cpp, ClusterBreak): a compatibility character that begins longer
// rules followed by a mark that continues one (ª + U+0300: "à" to SentencePiece, "a" here).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"

namespace roformer::tools {

struct HfTokenizerOptions {
  int64_t model_max_length = 512;  // model.max_position_embeddings
  int64_t type_vocab_size = 2;     // the pair template gives segment B type 1 only when the model has it
};

// tokenizer.json for a roformer SentencePiece model (unigram or BPE, with [PAD] [UNK] [CLS] [SEP]
// [MASK] at ids 0-4). Throws roformer::Error for a model whose encoding it cannot reproduce (byte
// fallback, whitespace as suffix, word or char models) or a file that is not a SentencePiece model.
nlohmann::json hf_tokenizer_json(const std::string& spm_model_path, const HfTokenizerOptions& options);

// Writes `tokenizer_json` (the text of a tokenizer.json: hf_tokenizer_json's dumped, or a
// tokenizer.json tokenizer's own) as tokenizer.json, with tokenizer_config.json (class
// PreTrainedTokenizerFast, so AutoTokenizer does not fall back to RoFormerTokenizer, and the special
// tokens) and special_tokens_map.json naming `tokenizer`'s special roles, into out_dir (created if needed).
void write_hf_tokenizer(const std::string& tokenizer_json, const data::Tokenizer& tokenizer, const std::string& out_dir,
                        const HfTokenizerOptions& options);

}  // namespace roformer::tools
