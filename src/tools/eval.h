// `roformer eval`: masked-token accuracy (top-1, top-5), loss and perplexity of a checkpoint over a
// whole data set, with masks from a fixed seed (the same figures for any batch size).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::model {
class PositionScheme;
}

namespace roformer::tools {

// The most tokens of one sequence eval and fill-mask take where the position scheme sets no bound
// (rotary, relative buckets, none): attention's scores grow with the square of the length (2^20
// tokens need 4 TiB of fp32 scores per head).
inline constexpr int64_t kMaxSequenceTokens = int64_t{1} << 20;

// The longest sequence eval and fill-mask take from a model: a learned absolute table's rows
// (model::PositionScheme::max_length: BERT's, DeBERTa-v1's input table, the enhanced mask decoder's),
// else kMaxSequenceTokens (rotary extends its table by the formula, relative buckets cover any
// distance, and without positions any length runs).
struct SequenceBound {
  int64_t tokens = kMaxSequenceTokens;
  bool table = false;  // the model's position table sets it (model.max_position_embeddings)
};
SequenceBound sequence_bound(const model::PositionScheme& positions);

struct EvalRequest {
  std::string checkpoint;          // checkpoint or run directory
  std::vector<std::string> data;   // input files, folders, patterns, or prepared directories; empty: the run's validation files
  std::string text_field;          // JSONL field / Parquet column of `data`; empty: the run's data.text_field
  double mask_prob = 0;            // 0: the checkpoint's eval.mask_prob (0.15 unless set)
  int64_t seed = 0;
  int64_t batch_size = 32;
  int64_t max_sequences = 0;       // 0: every sequence
  int64_t seq_len = 0;             // T of the evaluated sequences; 0: the checkpoint's data.max_seq_len
  std::string device = "auto";
  bool json = false;               // one JSON record on stdout (the table then on stderr)
};

// Prints the figures as a table on stdout, or with --json one record there (the table then on stderr);
// throws roformer::Error for user mistakes.
void run_eval(const EvalRequest& request);

}  // namespace roformer::tools
