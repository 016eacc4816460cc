// The length phases of a run (train.phases; docs/training.md, "Length phases"): from a given optimizer
// step on, sequences of another length and micro-batches of another size, over the same prepared
// corpus and one schedule over train.steps. This component owns them whole: their rules (and the
// lengths evaluation runs at), which phase trains a step, the switch of the data's loader at a
// boundary, the steps whose log record closes a phase (train/cadence.h), each phase's figures of a
// session and its part of trainer_state.json (the phase the loader's position belongs to). A new
// field of a phase is a member of config::PhaseConfig, a line of its entry keys in the config table
// (core/config.cpp) and its meaning here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/trainer_state.h"
#include "core/config.h"
#include "metrics/records.h"

namespace roformer::train {

class TrainingData;

// One phase resolved: optimizer steps [first_step, end_step) (0-based) at sequences of max_seq_len
// tokens, batch_size per micro-batch, and the keys that set them (its entry's, or those of the phase
// it keeps them from: data.max_seq_len and train.batch_size for the first).
struct LengthPhase {
  int64_t first_step = 0;
  int64_t end_step = 0;
  int64_t max_seq_len = 0;
  int64_t batch_size = 0;
  std::string seq_key;
  std::string batch_key;
};

// The phases of a config: the first (data.max_seq_len and train.batch_size from step 0), then one per
// train.phases entry that begins before train.steps; the last ends at train.steps.
std::vector<LengthPhase> resolve_length_phases(const config::Config& c);

// A run whose train.steps ends before some train.phases entries begin trains the phases it reaches
// (a smoke test of a phased config, say): the warning that says which it leaves out, or "".
std::string phases_cut_short(const config::Config& c);

// The rules (train/run_config.h): train.phases' entries in order, each changing the shape of the
// phase before it (entering a phase starts its data order anew); every phase's shape (an entry from
// train.steps on, which trains no step of a run cut short, too) within the position table,
// predicting something (data::validate_masking_shape) in a step that fits in 64 bits;
// eval.max_seq_len. Throws roformer::Error naming the key to change.
void validate_length_phases(const config::Config& c);

// The sequence length evaluation runs at: eval.max_seq_len, or (0) the length training ends with.
int64_t eval_seq_len(const config::Config& c);

// The keys of the first phase (data.max_seq_len, train.batch_size) that no phase trains with from
// 0-based step `step` on, because later entries set their own: a resumed run that changes them
// still continues exactly (checkpoint::check_resume_changes).
std::vector<std::string> keys_unused_from(const config::Config& c, int64_t step);

class LengthPhases {
 public:
  explicit LengthPhases(const config::Config& c);

  const std::vector<LengthPhase>& all() const { return phases_; }
  bool phased() const { return phases_.size() > 1; }
  // The phase the data serves now, and its index.
  const LengthPhase& now() const { return phases_[current_]; }
  size_t current() const { return current_; }
  // The index of the phase that trains 0-based step `step`.
  size_t phase_of(int64_t step) const;
  // The last (1-based) step of every phase but the last: a log record closes there, so that no
  // record's window (its means, tokens/s) spans two phases.
  std::vector<int64_t> boundaries() const;

  // Before 0-based step `step`: its phase entered, the data's loader switched to the phase's shape
  // (a phase entered anew starts at the beginning of its own order over the same corpus). Returns
  // whether the phase changed.
  bool enter(int64_t step, TrainingData& data);
  // A trained (1-based) step into its phase's figures of this session; global_batch: sequences per
  // optimizer step over every rank.
  void count(int64_t step, int64_t tokens, double seconds, int64_t global_batch);
  const std::vector<metrics::RunSummary::PhaseFigures>& figures() const { return figures_; }
  // "steps 1-540: 64 x 128, steps 541-600: 16 x 512": sequences x tokens per optimizer step, the
  // micro-batch times `micro_batches` (train.grad_accum x processes).
  std::string describe(int64_t micro_batches) const;

  // Its part of trainer_state.json: the phase the data's loader position belongs to; restore
  // switches the data's loader to it (before the data restores its position).
  void save(checkpoint::TrainerState& state) const;
  void restore(const checkpoint::TrainerState& state, TrainingData& data);

 private:
  void switch_to(size_t index, TrainingData& data);

  std::vector<LengthPhase> phases_;
  size_t current_ = 0;
  std::vector<metrics::RunSummary::PhaseFigures> figures_;  // this session's, in the order trained
};

}  // namespace roformer::train
