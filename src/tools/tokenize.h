// `roformer tokenizer encode`: the ids (or pieces) of each line of stdin, one line out per line in,
// for comparing a tokenizer with another implementation (Hugging Face `tokenizers` reads the same
// tokenizer.json).
#pragma once

#include <iosfwd>
#include <string>

namespace roformer::tools {

struct EncodeRequest {
  std::string tokenizer;            // what data::Tokenizer::load reads: .model, tokenizer.json or a folder
  bool add_special_tokens = false;  // the post-processor's special tokens around each line's ids
  bool pieces = false;              // each line's pieces as a JSON list instead of its ids
};

// Reads `in` to its end: each line (without its "\n"; a "\r" before it stays) encoded and written
// to `out` as its ids separated by spaces (an empty line for no ids), or as a JSON list of pieces.
// Throws roformer::Error naming the line for invalid UTF-8 (lines before it are written).
void run_tokenizer_encode(const EncodeRequest& request, std::istream& in, std::ostream& out);

}  // namespace roformer::tools
