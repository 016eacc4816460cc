// roformer's SentencePiece tokenizers: the backend that reads a .model (data/tokenizer.h's
// interface) and the training that `roformer tokenizer train` runs.
//
// Ids 0-4 are [PAD] [UNK] [CLS] [SEP] [MASK] in every roformer tokenizer: [PAD]/[UNK]/[CLS]/[SEP]
// are SentencePiece's pad/unk/bos/eos pieces and [MASK] a control symbol, so none of them is ever
// produced from text (the literal string "[MASK]" encodes as ordinary pieces; an unknown character
// gives [UNK]). The fingerprint is that of the .model file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace roformer::config {
struct Config;
}

namespace roformer::data {

// Whether `bytes` (a file's content) are a SentencePiece model, by their wire format.
bool is_sentencepiece_model(const std::string& bytes);

// A backend of a .model file's bytes. Throws roformer::Error naming `path` when they are not a
// SentencePiece model or lack the fixed special ids.
std::shared_ptr<const TokenizerBackend> load_sentencepiece(const std::string& path, const std::string& bytes);

struct TokenizerTrainOptions {
  std::vector<std::string> inputs;        // files, folders or glob patterns (input_files.h)
  std::string out_dir;                    // receives tokenizer.model and tokenizer.vocab
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";     // unigram | bpe
  double character_coverage = 0.9995;
  int64_t input_sentence_size = 2000000;  // paragraphs sampled (reservoir) from large inputs
  int64_t seed = 42;
  std::string text_field = "text";        // JSONL field / Parquet column holding the text
  bool progress = true;                   // progress of reading the inputs (bar on a TTY, else log lines)
  // How the user set vocab_size and character_coverage, for error messages (CLI flags or config keys).
  std::string vocab_size_name = "--vocab-size";
  std::string character_coverage_name = "--character-coverage";
  bool force = false;  // replace a tokenizer already in out_dir (refused otherwise)
};

// The files `roformer tokenizer train --out DIR` writes besides tokenizer.model (kTokenizerModelFile).
constexpr const char* kTokenizerVocabFile = "tokenizer.vocab";  // its pieces and scores, for reading
// The file beside tokenizer.model recording the settings it was trained with (training_settings).
constexpr const char* kTokenizerSettingsFile = "training.json";

// The settings that decide a trained tokenizer (inputs, vocabulary, model type, coverage, sampling,
// seed, text field) as canonical JSON text: equal text, same training.
std::string training_settings(const TokenizerTrainOptions& options);

// SentencePiece skips training paragraphs longer than this many bytes; the reader hands out none
// (longer ones come in pieces: text_reader.h, kMaxParagraphBytes).
constexpr int64_t kMaxSentenceBytes = 65536;

// Trains a tokenizer and returns the .model path (out_dir/tokenizer.model; tokenizer.vocab and
// training.json beside it). The model is written to a temporary name and renamed, so a failed run
// leaves an existing tokenizer untouched; an existing one is replaced only with `force`.
std::string train_tokenizer(const TokenizerTrainOptions& options);

// Options from the config's `tokenizer` section (inputs default to data.train_files).
TokenizerTrainOptions tokenizer_options_from_config(const config::Config& config, const std::string& out_dir);

}  // namespace roformer::data
