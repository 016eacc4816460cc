// `roformer tokenizer train|encode`, `roformer prepare`: argument parsing only (`roformer bench data`
// is the measurement front's, commands_bench.cpp).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/error.h"
#include "data/corpus.h"
#include "data/sentencepiece_tokenizer.h"
#include "tools/tokenize.h"

namespace roformer::app {

namespace {

constexpr const char* kInputHelp =
    "Input files (text; .jsonl/.json; Parquet; text and JSONL also .gz or .zst), folders (their corpus files, "
    "recursively) or quoted glob patterns such as 'corpus/*.parquet'; read in the order given, a folder's or "
    "pattern's files sorted by path";
constexpr const char* kTextFieldHelp = "JSONL field / Parquet column holding the text";
constexpr const char* kTokenizerHelp =
    "Tokenizer: a SentencePiece .model (roformer tokenizer train), a Hugging Face tokenizer.json, or a directory "
    "holding one";

}  // namespace

void register_data_commands(CLI::App& app) {
  // roformer tokenizer train|encode
  auto* tokenizer = app.add_subcommand("tokenizer", "Train a SentencePiece tokenizer; encode text with any tokenizer");
  tokenizer->require_subcommand(1);
  auto topts = std::make_shared<data::TokenizerTrainOptions>();
  auto no_tokenizer_progress = std::make_shared<bool>(false);
  auto* train = tokenizer->add_subcommand("train", "Train a tokenizer on text, JSONL or Parquet; writes DIR/tokenizer.model");
  train->add_option("--input", topts->inputs, kInputHelp)->required();
  train->add_option("--vocab-size", topts->vocab_size, "Vocabulary size, special tokens included")->required();
  train->add_option("--model-type", topts->model_type, "unigram | bpe")->capture_default_str();
  train->add_option("--out", topts->out_dir, "Output directory")->required();
  train->add_option("--character-coverage", topts->character_coverage, "Share of characters covered")->capture_default_str();
  train->add_option("--input-sentence-size", topts->input_sentence_size, "Paragraphs sampled from large inputs")->capture_default_str();
  train->add_option("--seed", topts->seed, "Sampling seed")->capture_default_str();
  train->add_option("--text-field,--jsonl-field", topts->text_field, kTextFieldHelp)->capture_default_str();
  train->add_flag("--force", topts->force, "Replace a tokenizer already in --out");
  train->add_flag("--no-progress", *no_tokenizer_progress, "No progress bar or progress log lines while reading");
  train->callback([topts, no_tokenizer_progress] {
    topts->progress = !*no_tokenizer_progress;
    data::train_tokenizer(*topts);
  });
  auto eopts = std::make_shared<tools::EncodeRequest>();
  auto* encode = tokenizer->add_subcommand(
      "encode", "Print the ids of each line of stdin, space-separated, one line out per line in (compare with tokenizers)");
  encode->add_option("--tokenizer", eopts->tokenizer, kTokenizerHelp)->required();
  encode->add_flag("--add-special-tokens", eopts->add_special_tokens,
                   "Put the tokenizer's special tokens around each line's ids ([CLS] ... [SEP])");
  encode->add_flag("--pieces", eopts->pieces, "Print each line's pieces as a JSON list instead of its ids");
  encode->callback([eopts] { tools::run_tokenizer_encode(*eopts, std::cin, std::cout); });

  // roformer prepare
  auto popts = std::make_shared<data::PrepareOptions>();
  auto no_progress = std::make_shared<bool>(false);
  auto* prepare = app.add_subcommand("prepare", "Encode a corpus once into binary token shards (read by mmap during training)");
  prepare->add_option("--tokenizer", popts->tokenizer_model, kTokenizerHelp)->required();
  prepare->add_option("--input", popts->inputs, kInputHelp)->required();
  prepare->add_option("--out", popts->out_dir, "Output directory")->required();
  prepare->add_option("--threads", popts->num_threads, "Encoding threads (0 = all cores)")->capture_default_str();
  prepare->add_option("--text-field,--jsonl-field", popts->text_field, kTextFieldHelp)->capture_default_str();
  prepare->add_flag("--force", popts->force, "Replace a prepared corpus already in --out (kept intact until the new one is complete)");
  prepare->add_flag("--no-progress", *no_progress, "No progress bar or progress log lines");
  prepare->callback([popts, no_progress] {
    popts->progress = !*no_progress;
    data::prepare_corpus(*popts);
  });
}

}  // namespace roformer::app
