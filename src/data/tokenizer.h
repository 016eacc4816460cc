// SentencePiece tokenizer with fixed special ids, its training, and a fingerprint of the model file.
//
// Ids 0-4 are [PAD] [UNK] [CLS] [SEP] [MASK] in every roformer tokenizer: [PAD]/[UNK]/[CLS]/[SEP]
// are SentencePiece's pad/unk/bos/eos pieces and [MASK] a control symbol, so none of them is ever
// produced from text (the literal string "[MASK]" encodes as ordinary pieces; an unknown character
// gives [UNK]). The fingerprint (FNV-1a 64 of the .model bytes, 16 hex digits) is stored with
// prepared data and checkpoints so data encoded by another tokenizer is refused.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace roformer::config {
struct Config;
}

namespace roformer::data {

class Tokenizer {
 public:
  static constexpr int32_t kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4;
  static constexpr int32_t kNumSpecial = 5;  // ids [0, kNumSpecial) are special

  // Throws roformer::Error when the file is missing, not a SentencePiece model, or lacks the fixed
  // special ids.
  static Tokenizer load(const std::string& model_path);

  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string id_to_piece(int32_t id) const;
  int64_t vocab_size() const { return static_cast<int64_t>(word_start_.size()); }
  const std::string& fingerprint() const { return fingerprint_; }
  const std::string& model_path() const { return model_path_; }
  bool is_special(int32_t id) const { return id >= 0 && id < kNumSpecial; }
  // The piece begins a word (SentencePiece's "▁" prefix); special ids are not word starts.
  bool is_word_start(int32_t id) const { return id >= 0 && id < vocab_size() && word_start_[id] != 0; }
  // One byte per id: 1 for word-start pieces (stored with prepared data for whole-word masking).
  const std::vector<uint8_t>& word_start_table() const { return word_start_; }

 private:
  Tokenizer() = default;  // only load() makes one, so a Tokenizer always holds a model

  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
  std::string model_path_;
  std::string fingerprint_;
  std::vector<uint8_t> word_start_;
};

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

// The files `roformer tokenizer train --out DIR` writes (and a run's RUN_DIR/tokenizer holds).
constexpr const char* kTokenizerModelFile = "tokenizer.model";  // the SentencePiece model
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

// FNV-1a 64 of the file's bytes as 16 lowercase hex digits. Throws roformer::Error if unreadable.
std::string file_fingerprint(const std::string& path);

}  // namespace roformer::data
