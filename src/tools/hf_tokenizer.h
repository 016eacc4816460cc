// The tokenizer half of `roformer export --format hf`: tokenizer.json (our SentencePiece model in
// the form of Hugging Face's `tokenizers` library), tokenizer_config.json and
// special_tokens_map.json, so that AutoTokenizer.from_pretrained(DIR) and pipeline("fill-mask")
// produce the ids roformer produces, with no package beyond transformers (and its tokenizers).
//
// tokenizer.json is built the way transformers' SpmConverter (convert_slow_tokenizer.py) builds
// it from a SentencePiece ModelProto:
//   normalizer     Precompiled(normalizer_spec.precompiled_charsmap) -- the NFKC table SentencePiece
//                  applies -- then Strip(right) and Replace(" {2,}" -> "▁") (remove_extra_whitespaces)
//   pre_tokenizer  Metaspace("▁", prepend_scheme always) (add_dummy_prefix; split on whitespace)
//   model          Unigram(pieces, scores, unk_id) or BPE(vocab, merges ranked by piece score)
//   added_tokens   the control pieces [PAD] [CLS] [SEP] [MASK] as special tokens
//   post_processor TemplateProcessing "[CLS] $A [SEP]" (pairs: "[CLS] $A [SEP] $B [SEP]")
//   decoder        Metaspace
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace roformer::tools {

struct HfTokenizerOptions {
  int64_t model_max_length = 512;  // model.max_position_embeddings
  int64_t type_vocab_size = 2;     // the pair template gives segment B type 1 only when the model has it
};

// tokenizer.json for a roformer SentencePiece model (unigram or BPE, with [PAD] [UNK] [CLS] [SEP]
// [MASK] at ids 0-4). Throws roformer::Error for a model whose encoding it cannot reproduce (byte
// fallback, whitespace as suffix, word or char models) or a file that is not a SentencePiece model.
nlohmann::json hf_tokenizer_json(const std::string& spm_model_path, const HfTokenizerOptions& options);

// Writes `tokenizer` (from hf_tokenizer_json) as tokenizer.json, with tokenizer_config.json (class
// PreTrainedTokenizerFast, so AutoTokenizer does not fall back to RoFormerTokenizer, and the special
// tokens) and special_tokens_map.json, into out_dir (created if needed).
void write_hf_tokenizer(const nlohmann::json& tokenizer, const std::string& out_dir,
                        const HfTokenizerOptions& options);

}  // namespace roformer::tools
