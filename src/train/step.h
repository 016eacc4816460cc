// The training step, apart from any run: the model (its fp32 weights and the compute copy the step
// runs), AdamW, the learning-rate schedule, the loss scaler, the gradient reducer, the CUDA graphs
// and the step's sums, with one call that trains one optimizer step on batches from a BatchSource.
// `roformer train` (train/training_run.h) owns one beside its data, checkpoints and metrics;
// `roformer bench` and the tests build one on its own (train/placement.h, then a BatchSource), so
// what they time and test is the very step that trains. Includes LibTorch: only train/ sources and
// tests include it.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/trainer_state.h"
#include "core/config.h"
#include "core/faults.h"
#include "data/loader.h"
#include "model/roformer.h"
#include "train/loss_scaler.h"
#include "train/step_graphs.h"

namespace roformer::dist {
class ProcessGroup;
class GradientReducer;
}  // namespace roformer::dist

namespace roformer::train {

class AdamW;
class BatchSource;
class LrSchedule;
class StageClock;
class Placement;

// How the step runs between logging steps, resolved once when it is built (TrainStep::mode):
enum class StepMode {
  // Every step reads its loss, accuracy and gradient norm back, clips on the host and stops at a
  // non-finite value before the update: the CPU, fp16 (its dynamic loss scale reads overflow back)
  // and the portable AdamW (optimizer.fused false).
  kSynced,
  // A step asked for no values reads nothing back: the clip coefficient min(1, clip / (norm + 1e-6))
  // is applied on the device, and a non-finite norm sets a sticky device flag that the fused AdamW
  // takes as found_inf, so no update is applied from that step on; the next synced step reports it.
  // CUDA with bf16 or fp32 and the fused AdamW, run eagerly.
  kSyncFree,
  // kSyncFree, with each micro-batch shape's forward + backward and the sync-free update replayed
  // as CUDA graphs (train/step_graphs.h): train.cuda_graph on a single process, without gradient
  // checkpointing (it saves and restores the generator's state, which a capture may not read) or
  // per-stage timings.
  kGraphed,
};
std::string to_string(StepMode mode);

// What a step's owner asks of it beyond the config.
struct StepOptions {
  // A device synchronize at every stage boundary, so StepTimings are exact (`bench --breakdown`;
  // rules out CUDA graphs, which run forward and backward as one).
  bool sync_timings = false;
  // Tests only: CPU steps take the sync-free path that CUDA steps take (device-side clipping, the
  // sticky non-finite flag, no read-back), so its logic is tested on a machine without a GPU.
  bool sync_free_on_cpu = false;
  core::Faults faults;  // the tests' fault injection (none unless set)
  // The tokenizer's padding id: its word-embedding row starts at zero and takes no gradient
  // (model::RoFormerOptions::pad_token_id). SentencePiece's [PAD] is 0.
  int64_t pad_token_id = 0;
};

// Wall-clock seconds per stage of one step (data, forward, backward, optimizer), summed over the
// micro-batches. On CUDA the stages are only meaningful with StepOptions::sync_timings; without it
// kernels still run when the host moves on and the time lands in a later stage.
struct StepTimings {
  double data = 0;       // waiting for the batch source
  double forward = 0;    // host-to-device copies, forward, cross entropy
  double backward = 0;
  double optimizer = 0;  // gradient norm, clipping, AdamW, zero_grad (and the host sync, if any)
};

struct StepResult {
  double loss = 0;        // valid when synced
  double accuracy = 0;    // valid when synced
  double grad_norm = 0;   // valid when synced
  int64_t tokens = 0;     // non-padding input tokens (of all ranks)
  int64_t n_pred = 0;     // predicted positions (of all ranks)
  bool stop = false;      // a stop signal reached this process (or, distributed, any rank) by the step's start
  bool abandoned = false; // a stop signal during the micro-batches: the step was given up, its data and
                          // random state rewound, nothing updated (a single process, grad_accum > 1)
  bool finite = true;
  bool skipped = false;   // fp16: step skipped for a non-finite gradient
  bool synced = true;     // false: a step without host sync; loss/accuracy/grad_norm not read back
  bool nonfinite_earlier = false;  // the non-finite value came from an earlier unsynced step
  StepTimings timings;
};

class TrainStep {
 public:
  // Builds the model for vocab_size pieces (initialized from train.seed; model.vocab_size must be
  // 0 or vocab_size), its compute copy (train.param_dtype bf16), AdamW, the schedule, the loss
  // scaler, the gradient reducer (data parallel) and, in kGraphed mode, the CUDA graphs, on the
  // placement's device; resolves the mode and logs it. Throws roformer::Error for a vocabulary that
  // contradicts the config or a model that cannot fit the device.
  TrainStep(const config::Config& cfg, int64_t vocab_size, const Placement& placement, StepOptions options = {});
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // One optimizer step over grad_accum micro-batches from `batches`. host_sync false asks for no
  // values back: a sync-free step then reads nothing (StepResult::synced false); a kSynced step, a
  // step during which a stop was requested, and host_sync true read back. Counts the step unless it
  // was given up (StepResult::abandoned).
  StepResult run(BatchSource& batches, bool host_sync = true);

  StepMode mode() const { return mode_; }
  const config::Config& config() const { return cfg_; }
  const c10::Device& device() const { return device_; }
  // The weights (fp32: what checkpoints save and the optimizer updates).
  model::RoFormerForMaskedLM& model() { return model_; }
  // The model the step runs: model() itself, or its bf16 copy with train.param_dtype: bf16.
  model::RoFormerForMaskedLM& compute_model() { return compute_; }
  AdamW& optimizer() { return *optimizer_; }
  const LossScaler& scaler() const { return scaler_; }
  // The step's CUDA graphs (kGraphed), or null where the step runs eagerly.
  const StepGraphs* cuda_graphs() const { return graphs_.get(); }
  // The learning rate of optimizer step `step` (0-based).
  double learning_rate(int64_t step) const;
  int64_t steps_done() const { return steps_done_; }  // optimizer steps counted (the schedule's position)
  int64_t tokens_seen() const { return tokens_seen_; }  // non-padding input tokens of every rank

  // Its part of a checkpoint's trainer_state.json: the step, the tokens seen and the loss scale
  // (the fused AdamW's device step counts are brought to the host first, for optimizer.pt).
  void save(checkpoint::TrainerState& state);
  // After the checkpoint's tensors were loaded into model() and optimizer(): its part back.
  void restore(const checkpoint::TrainerState& state);
  // The weights were replaced from outside (--init-from, a broadcast): the compute copy takes them.
  void weights_loaded();

 private:
  struct StepSums {
    torch::Tensor loss, correct;  // float64 on the device: summed cross entropy, correct predictions
  };
  void resolve_mode();  // mode_ and graphs_, logged once
  std::vector<data::Batch> step_batches(BatchSource& batches, StepResult& r);
  // abandon_on_stop: give up between micro-batches when a stop signal arrives (r.abandoned).
  void forward_backward(const std::vector<data::Batch>& micro, StepResult& r, StageClock& clock, bool abandon_on_stop);
  // One micro-batch on the device: forward, loss, backward (loss scaled by loss_factor), the sums,
  // the gradients accumulated. What a micro-batch's CUDA graph captures.
  void micro_step(const MicroInputs& in, double loss_factor, const std::function<void()>& after_forward = {});
  std::vector<torch::Tensor> unscaled_gradients();
  void update_unsynced();  // gradient norm, clip, non-finite flag, update: no read-back (a graph captures it)
  void update_synced(StepResult& r);  // norm, loss and accuracy read back; skip, or clip and update

  config::Config cfg_;                              // train.param_dtype resolved (Placement)
  StepOptions options_;
  c10::Device device_;
  dist::ProcessGroup& group_;                       // a world of one unless a launcher started ranks
  model::RoFormerForMaskedLM model_{nullptr};      // the fp32 weights
  model::RoFormerForMaskedLM compute_{nullptr};    // what the step runs: model_, or its bf16 copy
  std::unique_ptr<AdamW> optimizer_;               // holds the state (checkpointed) on every path
  std::unique_ptr<LrSchedule> schedule_;
  LossScaler scaler_;                              // fp16: dynamic loss scaling; otherwise a factor of 1
  std::unique_ptr<dist::GradientReducer> reducer_;  // null for a world of one (dist::make_gradient_reducer)
  StepMode mode_ = StepMode::kSynced;
  std::unique_ptr<StepGraphs> graphs_;  // kGraphed only
  torch::Tensor nonfinite_;             // sync-free: sticky device flag, set by any non-finite step since the last sync
  StepSums sums_;                       // the step's loss and correct sums, zeroed per step (graphs write them)
  int64_t steps_done_ = 0;
  int64_t tokens_seen_ = 0;
};

}  // namespace roformer::train
