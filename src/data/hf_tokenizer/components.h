// The components of a tokenizer.json, each as `tokenizers` defines it: normalizers (text -> text),
// pre-tokenizers (pieces -> pieces), models (a piece -> ids, in models.h), post-processors (the
// special tokens around a sequence) and decoders (tokens -> text). Each family is read from its JSON object by one parse_*
// function, which refuses a type or an option it does not implement, naming it (a JsonReader error:
// the file, the key, what roformer implements).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json_read.h"
#include "data/hf_tokenizer/pieces.h"
#include "data/hf_tokenizer/regex.h"

namespace roformer::data::hf {

// The advice of every refusal of a tokenizer.json's content: a component or option roformer does
// not implement, a value of the wrong type, a merge of tokens not in the vocabulary.
constexpr const char* kUnsupportedAdvice =
    "save the tokenizer again with Hugging Face tokenizers, or use one made of the components docs/data.md lists "
    "(roformer refuses any other rather than give other ids than tokenizers)";

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Normalizes piece.text in place (piece.first_aligned cleared where a leading character goes).
  virtual void normalize(Piece& piece) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and may rewrite) the pieces that are still text.
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
  // The mark that begins a word's first piece in the vocabulary ("Ġ" for ByteLevel, "▁" for
  // Metaspace), or "" (whole-word masking: data/tokenizer.h).
  virtual std::string word_start_mark() const { return ""; }
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // The ids of one sequence with the special tokens added around them.
  virtual std::vector<int32_t> single(const std::vector<int32_t>& ids) const = 0;
  // The ids of the one token before and the one token after a single sequence ([CLS] $A [SEP]),
  // -1 where the template is not of that shape: the [CLS] and [SEP] roles unless others are named.
  virtual std::pair<int32_t, int32_t> single_frame() const { return {-1, -1}; }
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the tokens of an id sequence into text parts (tokenizers' decode_chain).
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Each reads the component's JSON object `j` (with a "type").
std::unique_ptr<Normalizer> parse_normalizer(const core::JsonReader& j);
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const core::JsonReader& j);
std::unique_ptr<PostProcessor> parse_post_processor(const core::JsonReader& j);
std::unique_ptr<Decoder> parse_decoder(const core::JsonReader& j);

// The object at parent[key], or nullopt when the key is absent or null (no such step).
std::optional<core::JsonReader> optional_object(const core::JsonReader& parent, const std::string& key);

// A Replace's or Split's pattern at j[key]: {"String": literal} or {"Regex": Oniguruma pattern}.
std::unique_ptr<Regex> parse_pattern(const core::JsonReader& j, const std::string& key);

// parent[key], one of `names` (the file's spelling), as its index; anything else is refused.
size_t one_of(const core::JsonReader& parent, const std::string& key, const std::vector<std::string>& names);

}  // namespace roformer::data::hf
