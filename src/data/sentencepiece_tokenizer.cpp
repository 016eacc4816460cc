// The SentencePiece backend (a .model with [PAD] [UNK] [CLS] [SEP] [MASK] at ids 0-4) and
// tokenizer training from a streamed and sampled sentence iterator; see sentencepiece_tokenizer.h.
#include "data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/config.h"
#include "core/error.h"
#include "core/file.h"
#include "core/publish.h"
#include "core/utf8.h"
#include "data/input_files.h"
#include "data/read_progress.h"
#include "data/byte_stream.h"
#include "data/spm_model.h"
#include "data/text_reader.h"

namespace roformer::data {

namespace fs = std::filesystem;

namespace {

static_assert(kMaxSentenceBytes >= static_cast<int64_t>(kMaxParagraphBytes), "SentencePiece would skip paragraphs");

constexpr int32_t kNumSpecial = 5;  // ids [0, kNumSpecial) are the special pieces
const char* const kSpecialPieces[kNumSpecial] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

// Streams the paragraphs of every input to SentencePiece; SentencePiece keeps a reservoir sample
// of input_sentence_size of them, so memory stays bounded however large the inputs are.
class ParagraphIterator : public sentencepiece::SentenceIterator {
 public:
  // `extra` (if not empty) is served first, as one more paragraph.
  ParagraphIterator(const std::vector<std::string>& inputs, const std::string& field, const std::string& extra,
                    bool progress)
      : inputs_(inputs), field_(field), progress_("tokenizer: reading", progress, static_cast<int64_t>(inputs.size()),
                                                  total_size(inputs)) {
    if (!extra.empty()) paragraphs_.push_back(extra);
    else advance();
  }
  bool done() const override { return done_; }
  void Next() override {
    ++index_;
    advance();
  }
  const std::string& value() const override { return paragraphs_[index_]; }
  sentencepiece::util::Status status() const override {
    if (error_.empty()) return sentencepiece::util::Status();
    return sentencepiece::util::Status(sentencepiece::util::StatusCode::kInvalidArgument, error_);
  }
  const std::string& error() const { return error_; }
  int64_t count() const { return count_; }

 private:
  static int64_t total_size(const std::vector<std::string>& files) {
    int64_t bytes = 0;
    for (const auto& f : files) bytes += static_cast<int64_t>(fs::file_size(f));
    return bytes;
  }

  // Moves to the next paragraph, opening the next file when one ends. Errors (bad UTF-8, bad JSON)
  // end the iteration and are reported through status().
  void advance() {
    try {
      while (index_ >= paragraphs_.size()) {
        index_ = 0;
        paragraphs_.clear();
        if (reader_ && reader_->next(paragraphs_)) {
          cut_for_training(paragraphs_);
          progress_.update(static_cast<int64_t>(file_) - 1, done_bytes_ + reader_->bytes_read(), -1);
          continue;
        }
        if (reader_) done_bytes_ += reader_->bytes_read();
        if (file_ >= inputs_.size()) {
          progress_.update(static_cast<int64_t>(file_), done_bytes_, -1, /*final=*/true);
          // SentencePiece trains from here on and says nothing until it is done.
          spdlog::info("tokenizer: read {} paragraphs ({:.1f} MB); SentencePiece is training the model now (no "
                       "progress until it is done)", count_, static_cast<double>(done_bytes_) / 1e6);
          done_ = true;
          return;
        }
        reader_ = std::make_unique<DocumentReader>(inputs_[file_++], field_);
      }
      ++count_;
    } catch (const Error& e) {
      error_ = e.what();
      done_ = true;
    }
  }

  // SentencePiece's seed search scans every repeated substring of a sentence up to the sentence's
  // end, so a long repetitive sentence costs about its length squared, times its copies (a 20 MB
  // line of one repeated word, read in 64 KiB pieces, kept it busy for over 15 minutes). Paragraphs
  // longer than kMaxTrainingSentenceBytes go to it in pieces cut before a space (a piece never spans
  // a space, so nothing it could learn is lost), and a piece of such a paragraph given before (a
  // repeated stretch) is not given again. Brown's longest paragraph (9.7 KB) stays whole.
  static constexpr size_t kMaxTrainingSentenceBytes = 16 * 1024;
  static constexpr size_t kMaxRemembered = size_t{1} << 20;  // pieces remembered for that (8 MB)
  void cut_for_training(std::vector<std::string>& paragraphs) {
    if (std::none_of(paragraphs.begin(), paragraphs.end(),
                     [](const std::string& p) { return p.size() > kMaxTrainingSentenceBytes; }))
      return;
    std::vector<std::string> out;
    for (auto& paragraph : paragraphs) {
      if (paragraph.size() <= kMaxTrainingSentenceBytes) {
        out.push_back(std::move(paragraph));
        continue;
      }
      for (size_t start = 0; start < paragraph.size();) {
        const std::string_view rest = std::string_view(paragraph).substr(start);
        const size_t cut = rest.size() <= kMaxTrainingSentenceBytes ? rest.size() : text_cut(rest, kMaxTrainingSentenceBytes);
        start += cut;
        const bool repeated = given_.size() < kMaxRemembered &&
                              !given_.insert(std::hash<std::string_view>()(rest.substr(0, cut))).second;
        if (!repeated) out.emplace_back(rest.substr(0, cut));
      }
    }
    paragraphs = std::move(out);
  }

  std::vector<std::string> inputs_;
  std::string field_;
  std::unordered_set<size_t> given_;  // hashes of the pieces of long paragraphs given (cut_for_training)
  ReadProgress progress_;
  int64_t done_bytes_ = 0;  // of the files read to the end
  size_t file_ = 0;
  std::unique_ptr<DocumentReader> reader_;
  std::vector<std::string> paragraphs_;
  size_t index_ = 0;
  bool done_ = false;
  std::string error_;
  int64_t count_ = 0;
};

// The two numbers of a SentencePiece message "... <before>A vs B..." or "... (A)... <= B." (0 when absent).
std::pair<int64_t, int64_t> numbers_after(const std::string& message, const std::string& marker) {
  const size_t at = message.find(marker);
  if (at == std::string::npos) return {0, 0};
  std::vector<int64_t> found;
  for (size_t i = at + marker.size(); i < message.size() && found.size() < 2; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(message[i]))) continue;
    size_t used = 0;
    found.push_back(std::stoll(message.substr(i), &used));
    i += used;
  }
  return found.size() == 2 ? std::make_pair(found[0], found[1]) : std::make_pair(int64_t{0}, int64_t{0});
}

// SentencePiece's refusal, said in terms of the setting the user controls.
[[noreturn]] void explain_training_failure(const std::string& status, const TokenizerTrainOptions& o) {
  if (const auto [have, need] = numbers_after(status, "smaller than required_chars."); need > 0)
    throw Error(fmt::format("{} = {} is too small for this text: SentencePiece needs at least {} pieces (the 5 "
                            "special tokens plus every character kept, the 94 printable ASCII ones included); "
                            "raise {} to at least {} (a few thousand is usual)",
                            o.vocab_size_name, have, need, o.vocab_size_name, need));
  if (const auto [have, most] = numbers_after(status, "Vocabulary size too high"); most > 0)
    throw Error(fmt::format("{} = {} is more pieces than this text supports (at most {} can be learned from it); "
                            "lower {} to {} or less, or train the tokenizer on more text",
                            o.vocab_size_name, have, most, o.vocab_size_name, most));
  throw Error("tokenizer training failed: " + status +
              " (the vocabulary must hold every character kept, including the 94 printable ASCII characters, "
              "and the text must be varied enough for the requested size: adjust " + o.vocab_size_name + ")");
}

std::string printable_ascii() {
  std::string chars;
  for (char c = '!'; c <= '~'; ++c) chars += c;
  return chars;
}


// A .model's processor, its pieces' word starts and the file's bytes.
class SentencePieceBackend : public TokenizerBackend {
 public:
  SentencePieceBackend(std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor, std::string bytes,
                       int model_type)
      : processor_(std::move(processor)), bytes_(std::move(bytes)), model_type_(model_type) {
    static const std::string kWordMark = "\xE2\x96\x81";  // "▁"
    const int n = processor_->GetPieceSize();
    word_start_.assign(static_cast<size_t>(n), 0);
    for (int id = kNumSpecial; id < n; ++id)
      word_start_[id] = processor_->IdToPiece(id).compare(0, kWordMark.size(), kWordMark) == 0 ? 1 : 0;
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    const auto status = processor_->Encode(text, &ids);
    if (!status.ok()) throw Error("tokenizer failed to encode text: " + status.ToString());
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  std::vector<int32_t> add_special_tokens(const std::vector<int32_t>& ids) const override {
    const SpecialTokens s = SpecialTokens::sentencepiece();
    std::vector<int32_t> out = {s.cls};
    out.insert(out.end(), ids.begin(), ids.end());
    out.push_back(s.sep);
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    const auto status = processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    if (!status.ok()) throw Error("tokenizer failed to decode ids: " + status.ToString());
    return text;
  }
  std::string id_to_piece(int32_t id) const override { return processor_->IdToPiece(id); }
  int64_t vocab_size() const override { return processor_->GetPieceSize(); }
  SpecialTokens special_tokens() const override { return SpecialTokens::sentencepiece(); }
  bool is_word_start(int32_t id) const override { return word_start_[static_cast<size_t>(id)] != 0; }
  std::string description() const override {
    return model_type_ == 2 ? "SentencePiece BPE" : model_type_ == 1 ? "SentencePiece unigram" : "SentencePiece";
  }
  std::vector<std::pair<std::string, std::string>> files() const override { return {{kTokenizerModelFile, bytes_}}; }

 private:
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> processor_;
  std::string bytes_;
  int model_type_;
  std::vector<uint8_t> word_start_;
};

}  // namespace

bool is_sentencepiece_model(const std::string& bytes) { return parse_spm_model(bytes).has_value(); }

std::shared_ptr<const TokenizerBackend> load_sentencepiece(const std::string& model_path, const std::string& bytes) {
  // What the file is, from its bytes: SentencePiece's own load errors are worded differently in
  // each version (0.1.97 "ParseFromArray", 0.2.0 "could not parse ModelProto").
  const std::optional<SpmModel> parsed = parse_spm_model(bytes);
  if (!parsed)
    throw Error("cannot load tokenizer " + model_path + ": the file is not a SentencePiece model; give the "
                "tokenizer.model written by `roformer tokenizer train` (tokenizer.model or --tokenizer)");
  auto sp = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->LoadFromSerializedProto(bytes);
  if (!status.ok()) throw Error("cannot load tokenizer " + model_path + ": " + status.ToString());
  const int n = sp->GetPieceSize();
  for (int32_t id = 0; id < kNumSpecial; ++id) {
    // [UNK] must be the unknown piece and the others control pieces: a user-defined [MASK] would be
    // matched in text.
    const bool right_type = id < n && (id == 1 ? sp->IsUnknown(id) : sp->IsControl(id));
    if (id >= n || sp->IdToPiece(id) != kSpecialPieces[id] || !right_type)
      throw Error("tokenizer " + model_path + " does not have " + kSpecialPieces[id] + " at id " + std::to_string(id) +
                  " (roformer needs [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4; train one with `roformer tokenizer train`)");
  }
  return std::make_shared<SentencePieceBackend>(std::move(sp), bytes, parsed->model_type);
}

namespace {

// The largest vocabulary trained (tokenizer.vocab_size, --vocab-size): check_train_options.
constexpr int64_t kMaxVocabSize = 1000000;

// Everything SentencePiece would refuse (or abort on), and an --out that holds a tokenizer already.
void check_train_options(const TokenizerTrainOptions& options) {
  if (options.vocab_size <= kNumSpecial)
    throw Error("tokenizer vocab_size " + std::to_string(options.vocab_size) + " is too small: ids 0-4 are taken by " +
                "[PAD] [UNK] [CLS] [SEP] [MASK] and the 94 printable ASCII characters are always pieces; use at least a few hundred");
  // SentencePiece keeps the size in an int and grows it by a tenth for its seed pieces: near the top of
  // that range the product wraps and training runs without end. No text supports a million pieces
  // (the largest released vocabularies hold about 256k).
  if (options.vocab_size > kMaxVocabSize)
    throw Error(fmt::format("{} = {} is beyond the {} pieces a tokenizer can have here (the largest released "
                            "vocabularies hold about 256k; a few thousand to 64k is usual): lower {}",
                            options.vocab_size_name, options.vocab_size, kMaxVocabSize, options.vocab_size_name));
  if (options.model_type != "unigram" && options.model_type != "bpe")
    throw Error("tokenizer model_type must be unigram or bpe, got " + options.model_type);
  for (const char* name : {kTokenizerModelFile, kTokenizerVocabFile, kTokenizerSettingsFile}) {
    std::error_code ec;
    if (!options.force && fs::exists(fs::path(options.out_dir) / name, ec))
      throw Error(fmt::format("--out {} already holds a tokenizer ({}); pass --force to replace it (it stays intact "
                              "if training fails), or choose a new directory", options.out_dir, name));
  }
  if (!(options.character_coverage >= 0.98 && options.character_coverage <= 1.0))
    throw Error(fmt::format("{} = {} is outside what SentencePiece accepts, [0.98, 1]: use 0.9995 for text in a "
                            "large alphabet, 1.0 for a small one", options.character_coverage_name,
                            options.character_coverage));
}

// SentencePiece's trainer arguments. Every printable ASCII character should be a piece, so English
// text (and the literal strings "[MASK]", "[PAD]", ...) never encodes to [UNK]. The unigram trainer
// guarantees it through required_chars; the BPE trainer aborts on a required character absent from
// the text, so for BPE the characters are instead offered as one extra training paragraph (*extra;
// kept unless sampling drops it).
std::unordered_map<std::string, std::string> trainer_spec(const TokenizerTrainOptions& options, std::string* extra) {
  std::unordered_map<std::string, std::string> spec = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"input_sentence_size", std::to_string(options.input_sentence_size)},
      {"shuffle_input_sentence", "true"},
      {"seed_sentencepiece_size", "1000000"},
      {"max_sentence_length", std::to_string(kMaxSentenceBytes)},
      {"num_threads", std::to_string(std::max(1u, std::thread::hardware_concurrency()))},
      {"pad_id", "0"}, {"unk_id", "1"}, {"bos_id", "2"}, {"eos_id", "3"},
      {"pad_piece", "[PAD]"}, {"unk_piece", "[UNK]"}, {"bos_piece", "[CLS]"}, {"eos_piece", "[SEP]"},
      // A control symbol is never matched in text, so "[MASK]" typed in a document stays text.
      {"control_symbols", "[MASK]"},
      {"minloglevel", "1"},
  };
  extra->clear();
  if (options.model_type == "unigram") {
    spec["required_chars"] = printable_ascii();
  } else {
    for (const char c : printable_ascii()) *extra += std::string(1, c) + " ";
  }
  return spec;
}

// tokenizer.model, tokenizer.vocab and the settings record into --out, all written in a staging
// folder first (core/publish.h), so that a failed write (a full disk) or a stop signal leaves the
// old tokenizer and its record as they were. The old settings record goes first and the new one
// comes last: a record never describes a model it did not train.
Tokenizer write_trained_tokenizer(const TokenizerTrainOptions& options, const std::string& model) {
  core::StagingDir staging(options.out_dir, ".tokenizer-staging-");
  core::write_file_checked((staging / kTokenizerModelFile).string(), model);
  const Tokenizer staged = Tokenizer::load((staging / kTokenizerModelFile).string());
  std::string vocab;
  for (int32_t id = 0; id < staged.vocab_size(); ++id) vocab += staged.id_to_piece(id) + "\t" + std::to_string(id) + "\n";
  core::write_file_checked((staging / kTokenizerVocabFile).string(), vocab);
  core::write_file_checked((staging / kTokenizerSettingsFile).string(), training_settings(options));
  const fs::path out(options.out_dir);
  staging.publish({out / kTokenizerSettingsFile}, {kTokenizerModelFile, kTokenizerVocabFile, kTokenizerSettingsFile});
  return Tokenizer::load((out / kTokenizerModelFile).string());
}

}  // namespace

std::string train_tokenizer(const TokenizerTrainOptions& options) {
  const std::vector<std::string> files = expand_inputs(options.inputs);
  if (options.out_dir.empty()) throw Error("no output directory given for the tokenizer (--out DIR)");
  if (fs::exists(options.out_dir) && !fs::is_directory(options.out_dir))
    throw Error("--out " + options.out_dir + " exists and is not a directory");
  const core::OutputDirClaim claim(options.out_dir, "--out");  // one tokenizer training into it at a time
  check_train_options(options);
  std::string extra;
  const auto spec = trainer_spec(options, &extra);
  // SentencePiece seeds its sampling from a global seed.
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(options.seed));
  spdlog::info("training a {} tokenizer ({} pieces) on {} file(s)", options.model_type, options.vocab_size,
               files.size());
  const auto start = std::chrono::steady_clock::now();
  ParagraphIterator it(files, options.text_field, extra, options.progress);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(spec, &it, &model);
  if (!it.error().empty()) throw Error(it.error());
  if (it.count() == 0) throw Error("no text found in the tokenizer inputs (are the files empty?)");
  if (!status.ok()) explain_training_failure(status.ToString(), options);
  const Tokenizer tok = write_trained_tokenizer(options, model);
  const std::string model_path = (fs::path(options.out_dir) / kTokenizerModelFile).string();
  spdlog::info("tokenizer: {} pieces ({}) from {} paragraphs -> {} (fingerprint {}) in {:.1f}s", tok.vocab_size(),
               options.model_type, it.count(), model_path, tok.fingerprint(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return model_path;
}

std::string training_settings(const TokenizerTrainOptions& options) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& f : options.inputs) inputs.push_back(core::utf8_or_escaped(fs::absolute(f).lexically_normal().string()));
  const nlohmann::json j = {{"inputs", inputs},
                            {"vocab_size", options.vocab_size},
                            {"model_type", options.model_type},
                            {"character_coverage", options.character_coverage},
                            {"input_sentence_size", options.input_sentence_size},
                            {"seed", options.seed},
                            {"text_field", core::utf8_or_escaped(options.text_field)}};
  return j.dump(2) + "\n";
}

TokenizerTrainOptions tokenizer_options_from_config(const config::Config& config, const std::string& out_dir) {
  TokenizerTrainOptions o;
  o.inputs = config.tokenizer.input.empty() ? config.data.train_files : config.tokenizer.input;
  o.out_dir = out_dir;
  o.vocab_size = config.tokenizer.vocab_size;
  o.model_type = config.tokenizer.model_type;
  o.character_coverage = config.tokenizer.character_coverage;
  o.input_sentence_size = config.tokenizer.input_sentence_size;
  o.seed = config.tokenizer.seed;
  o.text_field = config.data.text_field;
  o.vocab_size_name = "tokenizer.vocab_size";
  o.character_coverage_name = "tokenizer.character_coverage";
  return o;
}

}  // namespace roformer::data
