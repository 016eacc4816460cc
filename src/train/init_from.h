// `roformer train --init-from PATH`: a new run that starts from the weights of a Hugging Face
// export (`roformer export --format hf`), one of our checkpoints, or a run directory (its newest
// checkpoint) -- continued, domain-adaptive pretraining on the user's own text.
//
// The weights bring their tokenizer (the run uses it instead of training one) and their
// architecture: the config must describe the same model, checked key by key before anything is
// built, and the tensors must carry the model's names and shapes exactly. The optimizer, the
// learning-rate schedule, the step and the data position start fresh.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace roformer::model {
class RoFormerForMaskedLMImpl;
}
namespace roformer::hf {
class Family;
}

namespace roformer::train {

struct InitSource {
  std::string dir;                   // the export directory or the resolved checkpoint directory
  std::string kind;                  // "Hugging Face export" | "checkpoint"
  std::string weights;               // its model.safetensors (Hugging Face names)
  std::string tokenizer_model;       // the tokenizer file the weights were trained with (.model or tokenizer.json)
  config::ModelConfig architecture;  // the model the weights belong to (dropout etc. left at defaults)
  int64_t vocab_size = 0;            // rows of the word embedding
  const hf::Family* family = nullptr;  // an export's Hugging Face family (its tensors' names); null: a checkpoint
  // Set by check_init_architecture: the position keys the run changes from the weights (context
  // extension: "model.rotary_base 10000.0 -> 160000.0", ...), said in the run's log, and for a learned
  // absolute table copy-extended to more rows, the rows the weights have (0: no copy).
  std::vector<std::string> extended;
  int64_t copied_position_rows = 0;
};

// Throws roformer::Error when `path` does not exist, is neither an export nor a checkpoint, is a
// damaged checkpoint, or lacks the tokenizer.
InitSource find_init_source(const std::string& path);

// The config's model section against the weights' architecture: the first key that differs is an
// error naming it and both values, except what the position scheme can extend (context extension):
// a rotary (or position-free) model's model.rotary_base and model.max_position_embeddings, which no
// weight depends on, and with `copy_positions` (train --extend-positions) a learned absolute table's
// max_position_embeddings raised, its new rows copied from the trained ones. Records them in `source`.
void check_init_architecture(InitSource& source, const config::Config& config, bool copy_positions = false);

// Copies the source's tokenizer to RUN_DIR/tokenizer/tokenizer.model (the run's own copy) and
// returns that path. tokenizer.model in the config naming another tokenizer, or a different
// tokenizer already in the run directory, is an error.
std::string adopt_init_tokenizer(const InitSource& source, const config::Config& config, const std::string& run_dir);

// Copies the source's tensors into the model. Every tensor must exist on both sides with the same
// shape (a copy-extended absolute table: row i of the new one is row i mod N of the N trained);
// otherwise an error names the tensor and both shapes.
void load_init_weights(const InitSource& source, model::RoFormerForMaskedLMImpl& model);

}  // namespace roformer::train
