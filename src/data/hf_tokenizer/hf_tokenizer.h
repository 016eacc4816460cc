// A Hugging Face tokenizer.json as a tokenizer backend (data/tokenizer.h), giving the ids the
// `tokenizers` library gives for it:
//
//   text -> added tokens with normalized false found in the raw text
//        -> the normalizer on each remaining piece, then added tokens with normalized true found
//        -> the pre-tokenizer cuts the pieces into words -> the model turns each word into ids
//
// (tokenizers' TokenizerImpl::encode_single_sequence; the post-processor adds the special tokens
// only when asked). The components it implements are those of components.h and models.h; any other
// type or option is refused when the file is loaded, naming it. The file's truncation and padding
// are not applied (prepare encodes whole documents; compare with tokenizers with both off).
//
// The special roles come from a tokenizer_config.json beside the file, else a
// special_tokens_map.json beside it, else the post-processor ([CLS] and [SEP] around a single
// sequence) and the model (its unknown token), else the added tokens and vocabulary by the usual
// names ([MASK] or <mask>, [PAD] <pad> or <|padding|>, [CLS] or <s>, [SEP] or </s>, [UNK] or <unk>).
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace roformer::data::hf {

// Throws roformer::Error naming the file (or the file beside it) and what to do: not JSON, a
// component or option roformer does not implement, merges of tokens not in the vocabulary, a role
// naming a token the tokenizer does not have.
std::shared_ptr<const TokenizerBackend> load_hf_tokenizer(const std::string& path);

}  // namespace roformer::data::hf
