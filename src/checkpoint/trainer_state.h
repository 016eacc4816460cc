// trainer_state.json of a checkpoint: the loop's own state (step, tokens seen, data position,
// fp16 loss scaler) and what the resume checks need (world size, global batch, tokenizer). Parsed
// and checked in one place, so a damaged or hand-edited file is an error naming the file and field
// rather than a JSON exception; free of LibTorch (tests/fuzz/ reads it too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "metrics/records.h"

namespace roformer::checkpoint {

struct TrainerState {
  int64_t step = 0;
  int64_t tokens_seen = 0;
  int64_t loader_phase = 0;     // the length phase (train.phases) the loader position belongs to; 0: the first
  int64_t loader_epoch = 0;
  int64_t loader_position = 0;
  int64_t world_size = 1;
  std::optional<int64_t> global_batch_size;  // absent in checkpoints of older versions
  double loss_scale = 65536.0;
  int64_t good_steps = 0;
  std::string tokenizer_fingerprint;
  // Written for the reader (inspect, the model card); not needed to resume.
  int64_t num_parameters = 0;
  std::string reason;            // "periodic", "end of training", "signal 2", ...
  std::string roformer_version;
  // The latest evaluation before the save, if any. Older checkpoints hold its loss, accuracy,
  // top5_accuracy and perplexity only; a field of another type drops it (it is not needed to resume).
  std::optional<metrics::EvalRecord> last_eval;
};

// The file's text (JSON, two-space indent, a final newline): what parse_trainer_state reads.
std::string trainer_state_json(const TrainerState& state);

// `origin` (the file's path) prefixes every error. Throws roformer::Error.
TrainerState parse_trainer_state(const std::string& text, const std::string& origin);

}  // namespace roformer::checkpoint
