// The length phases of a run: their rules, the phase of a step, the loader's switch, the log
// boundaries and each phase's figures; see length_phases.h.
#include "train/length_phases.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "data/loader.h"
#include "train/training_data.h"

namespace roformer::train {
namespace {

// Far above any real step (the largest published ones hold a few million tokens), far below 2^63.
constexpr int64_t kMaxSequencesPerStep = int64_t{1} << 31;
constexpr int64_t kMaxTokensPerStep = int64_t{1} << 40;

// One entry: its step in order within train.steps, its values given in range, and a shape other than
// the phase before it (seq, batch: that phase's; updated to this one's).
void validate_entry(const config::Config& c, size_t i, int64_t& seq, int64_t& batch) {
  const config::PhaseConfig& p = c.train.phases[i];
  const std::string key = fmt::format("train.phases[{}]", i);
  if (i == 0 && p.from_step <= 0)
    config::invalid(fmt::format("{}.from_step ({}) must be > 0: the steps before the first phase are data.max_seq_len "
                                "and train.batch_size's", key, p.from_step));
  if (i > 0 && p.from_step <= c.train.phases[i - 1].from_step)
    config::invalid(fmt::format("{}.from_step ({}) must be greater than the previous phase's ({}): list the phases in "
                                "order", key, p.from_step, c.train.phases[i - 1].from_step));
  if (p.max_seq_len && *p.max_seq_len < 8)
    config::invalid(fmt::format("{}.max_seq_len ({}) must be at least 8 (or left out: the previous phase's)", key,
                                *p.max_seq_len));
  if (p.batch_size && *p.batch_size < 1)
    config::invalid(fmt::format("{}.batch_size ({}) must be at least 1 (or left out: the previous phase's)", key,
                                *p.batch_size));
  if (!p.max_seq_len && !p.batch_size)
    config::invalid(fmt::format("{} changes neither max_seq_len nor batch_size; give one or remove the phase", key));
  const int64_t next_seq = p.max_seq_len.value_or(seq), next_batch = p.batch_size.value_or(batch);
  if (next_seq == seq && next_batch == batch)  // entering it would only start the data order anew
    config::invalid(fmt::format("{} trains as the phase before it does (max_seq_len {}, batch_size {}): it would "
                                "change nothing but start the data order anew; change max_seq_len or batch_size, or "
                                "remove the phase", key, seq, batch));
  seq = next_seq;
  batch = next_batch;
}

// One phase's shape: its length within the position table, something to predict in each sequence
// and micro-batch, and a step that fits in 64 bits.
void validate_shape(const config::Config& c, const LengthPhase& p) {
  if (p.max_seq_len > c.model.max_position_embeddings)
    config::invalid(fmt::format("{} ({}) exceeds model.max_position_embeddings ({})", p.seq_key, p.max_seq_len,
                                c.model.max_position_embeddings));
  data::validate_masking_shape(c.masking, p.max_seq_len, p.batch_size, p.batch_key);
  // Products of settings must fit in 64 bits with room for the world size (at most 2^20 ranks) and
  // the memory estimate: sequences and tokens of one optimizer step.
  int64_t sequences = 0, tokens = 0;
  if (__builtin_mul_overflow(p.batch_size, c.train.grad_accum, &sequences) || sequences > kMaxSequencesPerStep ||
      __builtin_mul_overflow(sequences, p.max_seq_len, &tokens) || tokens > kMaxTokensPerStep)
    config::invalid(fmt::format("{} x train.grad_accum x {} = {} x {} x {} tokens per optimizer step is beyond what a "
                                "step can hold (at most {} sequences and {} tokens); lower train.grad_accum or {}",
                                p.batch_key, p.seq_key, p.batch_size, c.train.grad_accum, p.max_seq_len,
                                kMaxSequencesPerStep, kMaxTokensPerStep, p.batch_key));
}

}  // namespace

namespace {

// Every entry's phase, those from train.steps on included (they train no step of this run).
std::vector<LengthPhase> resolve_every_phase(const config::Config& c) {
  std::vector<LengthPhase> out = {
      {0, c.train.steps, c.data.max_seq_len, c.train.batch_size, "data.max_seq_len", "train.batch_size"}};
  for (size_t i = 0; i < c.train.phases.size(); ++i) {
    const config::PhaseConfig& p = c.train.phases[i];
    LengthPhase next = out.back();  // what an entry leaves out is the previous phase's, with its key
    out.back().end_step = p.from_step;
    next.first_step = p.from_step;
    if (p.max_seq_len) next.max_seq_len = *p.max_seq_len, next.seq_key = fmt::format("train.phases[{}].max_seq_len", i);
    if (p.batch_size) next.batch_size = *p.batch_size, next.batch_key = fmt::format("train.phases[{}].batch_size", i);
    out.push_back(next);
  }
  return out;
}

}  // namespace

std::vector<LengthPhase> resolve_length_phases(const config::Config& c) {
  std::vector<LengthPhase> out = resolve_every_phase(c);
  // A run cut short (train.steps lowered for a smoke test, say) trains the phases it reaches.
  while (out.size() > 1 && out.back().first_step >= c.train.steps) out.pop_back();
  out.back().end_step = c.train.steps;
  return out;
}

std::string phases_cut_short(const config::Config& c) {
  const size_t reached = resolve_length_phases(c).size() - 1;  // entries of train.phases the run reaches
  const size_t n = c.train.phases.size();
  if (reached == n) return "";
  const std::string left = reached + 1 == n ? fmt::format("train.phases[{}]", reached)
                                            : fmt::format("train.phases[{}] to [{}]", reached, n - 1);
  return fmt::format("train.steps {} ends before train.phases[{}] begins (from_step {}): the run trains {} of the "
                     "config's {} length phases, leaving out {} (more train.steps trains {})",
                     c.train.steps, reached, c.train.phases[reached].from_step, reached + 1, n + 1, left,
                     reached + 1 == n ? "it" : "them");
}

void validate_length_phases(const config::Config& c) {
  int64_t seq = c.data.max_seq_len, batch = c.train.batch_size;
  for (size_t i = 0; i < c.train.phases.size(); ++i) validate_entry(c, i, seq, batch);
  // Every phase's shape, a phase past a shortened run's end too: the config holds for the full run.
  for (const LengthPhase& p : resolve_every_phase(c)) validate_shape(c, p);
  if (c.eval.max_seq_len != 0 && c.eval.max_seq_len < 8)
    config::invalid(fmt::format("eval.max_seq_len ({}) must be at least 8, or 0 for the length training ends with",
                                c.eval.max_seq_len));
  if (c.eval.max_seq_len > c.model.max_position_embeddings)
    config::invalid(fmt::format("eval.max_seq_len ({}) exceeds model.max_position_embeddings ({})", c.eval.max_seq_len,
                                c.model.max_position_embeddings));
}

int64_t eval_seq_len(const config::Config& c) {
  return c.eval.max_seq_len != 0 ? c.eval.max_seq_len : resolve_length_phases(c).back().max_seq_len;
}

std::vector<std::string> keys_unused_from(const config::Config& c, int64_t step) {
  const auto phases = resolve_length_phases(c);
  bool seq_used = false, batch_used = false;
  for (const LengthPhase& p : phases) {
    if (p.end_step <= step) continue;  // over before the step
    seq_used = seq_used || p.seq_key == "data.max_seq_len";
    batch_used = batch_used || p.batch_key == "train.batch_size";
  }
  std::vector<std::string> out;
  if (!seq_used) out.push_back("data.max_seq_len");
  if (!batch_used) out.push_back("train.batch_size");
  return out;
}

LengthPhases::LengthPhases(const config::Config& c) : phases_(resolve_length_phases(c)) {}

size_t LengthPhases::phase_of(int64_t step) const {
  size_t index = 0;
  for (size_t i = 1; i < phases_.size(); ++i)
    if (step >= phases_[i].first_step) index = i;
  return index;
}

std::vector<int64_t> LengthPhases::boundaries() const {
  std::vector<int64_t> out;
  for (size_t i = 0; i + 1 < phases_.size(); ++i) out.push_back(phases_[i].end_step);
  return out;
}

bool LengthPhases::enter(int64_t step, TrainingData& data) {
  const size_t index = phase_of(step);
  if (index == current_) return false;
  switch_to(index, data);
  return true;
}

void LengthPhases::switch_to(size_t index, TrainingData& data) {
  const LengthPhase& p = phases_.at(index);
  data.reshape(p.max_seq_len, p.batch_size, p.seq_key);
  current_ = index;
}

void LengthPhases::count(int64_t step, int64_t tokens, double seconds, int64_t global_batch) {
  if (!phased()) return;
  const int64_t number = static_cast<int64_t>(current_) + 1;
  if (figures_.empty() || figures_.back().phase != number) {
    metrics::RunSummary::PhaseFigures f;
    f.phase = number;
    f.first_step = step;
    f.seq_len = now().max_seq_len;
    f.global_batch = global_batch;
    figures_.push_back(f);
  }
  auto& f = figures_.back();
  f.last_step = step;
  ++f.steps;
  f.tokens += tokens;
  f.seconds += seconds;
}

std::string LengthPhases::describe(int64_t micro_batches) const {
  std::string out;
  for (size_t i = 0; i < phases_.size(); ++i)
    out += fmt::format("{}steps {}-{}: {} x {}", i ? ", " : "", phases_[i].first_step + 1, phases_[i].end_step,
                       phases_[i].batch_size * micro_batches, phases_[i].max_seq_len);
  return out;
}

void LengthPhases::save(checkpoint::TrainerState& state) const { state.loader_phase = static_cast<int64_t>(current_); }

void LengthPhases::restore(const checkpoint::TrainerState& state, TrainingData& data) {
  if (state.loader_phase < 0 || state.loader_phase >= static_cast<int64_t>(phases_.size()))
    throw Error(fmt::format("the checkpoint's data position is in length phase {}, but the config has {} phase(s) "
                            "(train.phases): resume with the config the run was trained with",
                            state.loader_phase + 1, phases_.size()));
  if (static_cast<size_t>(state.loader_phase) != current_) switch_to(static_cast<size_t>(state.loader_phase), data);
}

}  // namespace roformer::train
