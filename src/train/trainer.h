// The Trainer, shared by `roformer train` (Trainer::run: the whole run with checkpoints, metrics and
// evaluation) and `roformer bench` and the tests (train_step() in a loop): both run the very same
// step. Built whole from a Plan (train/plan.h): its constructor makes the device, the process
// group, the run directory's files, the data, the model, the optimizer and, for a run, the
// checkpoint or --init-from weights it starts from. Includes LibTorch, so only train/ sources
// include it; the CLI uses launch.h.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/trainer_state.h"
#include "core/config.h"
#include "model/roformer.h"
#include "train/evaluate.h"
#include "train/loss_scaler.h"
#include "train/metrics.h"
#include "train/plan.h"
#include "train/step_graphs.h"
#include "train/tensorboard_sink.h"

namespace roformer::dist {
class ProcessGroup;
class GradientReducer;
}  // namespace roformer::dist

namespace roformer::checkpoint {
class Checkpointer;
struct CheckpointContents;
}  // namespace roformer::checkpoint

namespace roformer::train {

class AdamW;
class LrSchedule;
class MetricsWindow;
class ProgressReporter;
class TrainingData;

// Ends the phases of a step (StepTimings): seconds since the previous end, with a device
// synchronize first when timings are to be exact (Plan::sync_timings).
class PhaseClock {
 public:
  PhaseClock(const torch::Device& device, bool synchronize)
      : device_(device), synchronize_(synchronize && device.is_cuda()), last_(std::chrono::steady_clock::now()) {}
  void end(double& seconds);

 private:
  torch::Device device_;
  bool synchronize_;
  std::chrono::steady_clock::time_point last_;
};

// Wall-clock seconds per phase of one step, summed over the micro-batches. On CUDA the phases are
// only meaningful with Plan::sync_timings (a device synchronize at each boundary); without it
// kernels still run when the host moves on and the time lands in a later phase.
struct StepTimings {
  double data = 0;       // waiting for the loader (or building synthetic batches)
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
  bool synced = true;     // false: a CUDA step without host sync; loss/accuracy/grad_norm not read back
  bool nonfinite_earlier = false;  // the non-finite value came from an earlier unsynced step
  StepTimings timings;
};

// The loop's own counters: its part of a checkpoint's trainer_state.json.
struct LoopState {
  int64_t step = 0;          // optimizer steps done
  int64_t tokens_seen = 0;   // non-padding input tokens of every rank
  std::optional<EvalResult> last_eval;  // the latest evaluation of this session (written, not restored)
  void save(checkpoint::TrainerState& state) const;
  void restore(const checkpoint::TrainerState& state);
};

class Trainer {
 public:
  // Builds everything the plan describes; throws roformer::Error for what cannot be built (a device
  // that does not exist, missing data, a checkpoint that does not fit), before the first step.
  explicit Trainer(Plan plan);
  ~Trainer();

  // The whole training run (plan.writes_run): the steps with their logs, metrics, evaluations and
  // checkpoints, until train.steps or a stop signal (then saved). Returns 0. Started by torchrun or
  // srun with several processes, it is one rank of a data-parallel run: see docs/distributed.md.
  int run();

  // One optimizer step (grad_accum micro-batches). host_sync false lets a CUDA bf16/fp32 step run
  // without reading anything back (see train_step in train_step.cpp); CPU and fp16 steps always sync.
  StepResult train_step(bool host_sync = true);

  const Plan& plan() const { return plan_; }
  const config::Config& config() const { return plan_.cfg; }
  const torch::Device& device() const { return device_; }
  // The weights (fp32: what checkpoints save and the optimizer updates).
  model::RoFormerForMaskedLM& model() { return model_; }
  // The model the step runs: model() itself, or its bf16 copy with train.param_dtype: bf16.
  model::RoFormerForMaskedLM& compute_model() { return compute_; }
  bool uses_fused_adamw() const;
  // The step's CUDA graphs (train.cuda_graph), or null where the step runs eagerly.
  const StepGraphs* cuda_graphs() const { return graphs_.get(); }
  // AdamW's step count (of the first parameter) as a checkpoint saves it: the updates applied.
  int64_t adamw_step_count();
  int world_size() const { return plan_.env.world_size; }
  // Sequences per optimizer step over all ranks: batch_size x grad_accum x processes.
  int64_t global_batch() const { return plan_.cfg.train.batch_size * plan_.cfg.train.grad_accum * world_size(); }
  bool main_rank() const { return plan_.env.rank == 0; }

 private:
  // Construction, in order (trainer.cpp).
  void setup_device();
  void setup_run_dir();            // plan.writes_run: train.log, config.yaml, the checkpointer
  void check_ranks_start_alike();  // collective: same resolved config and checkpoint on every rank
  void setup_data();               // rank 0 first: it trains the tokenizer and prepares the data
  void setup_model_and_optimizer();
  void setup_cuda_graphs();        // graphs_, where train.cuda_graph can apply (see there)
  void setup_starting_point();     // plan.writes_run: the --init-from weights or the checkpoint, metrics, TensorBoard
  void check_memory(int64_t vocab_size) const;  // train/memory_check.h: refuses what cannot fit the device
  void resume();                   // from plan.resume: every component restores its own state
  void save_checkpoint(const std::string& reason);
  checkpoint::CheckpointContents checkpoint_contents();

  // The run (train_loop.cpp): evaluation, records, the checks and reports between steps.
  void run_eval();
  void record(const nlohmann::json& rec);  // a metrics record: metrics.jsonl and TensorBoard (rank 0)
  // A write the run depends on failed (metrics.jsonl, train.log): saves a checkpoint if it still can
  // (a single process), then throws roformer::Error saying what failed, what was kept and how to go on.
  [[noreturn]] void stop_for_failed_write(const std::string& what);
  // MFU of a logging window (model FLOPs per step / mean step time / peak of every rank's device);
  // none where the device's peak is unknown (the CPU, GPUs absent from core::known_peak_tflops).
  std::optional<double> model_flops_utilization(int64_t n_pred, double ms_per_step) const;
  void check_finite(const StepResult& r, int64_t last_synced) const;  // throws on a non-finite step
  void log_step(const StepResult& r, MetricsWindow& window, ProgressReporter& progress);
  bool stop_if_asked(const StepResult& r);
  void report_done() const;

  // The step (train_step.cpp): the batches, forward + backward, then one of the two exits of the update.
  struct StepSums {
    torch::Tensor loss, correct;  // float64 on the device: summed cross entropy, correct predictions
  };
  std::vector<data::Batch> step_batches(StepResult& r);
  // abandon_on_stop: give up between micro-batches when a stop signal arrives (r.abandoned).
  void forward_backward(const std::vector<data::Batch>& micro, StepResult& r, PhaseClock& clock,
                        bool abandon_on_stop = false);
  // One micro-batch on the device: forward, loss, backward (loss scaled by loss_factor), the sums,
  // the gradients accumulated. What a micro-batch's CUDA graph captures.
  void micro_step(const MicroInputs& in, double loss_factor, const std::function<void()>& after_forward = {});
  std::vector<torch::Tensor> unscaled_gradients();
  void update_unsynced();  // gradient norm, clip, non-finite flag, update: no read-back (a graph captures it)
  void update_synced(StepResult& r);  // norm, loss and accuracy read back; skip, or clip and update

  Plan plan_;                                       // as given, train.param_dtype resolved for the device
  torch::Device device_{torch::kCPU};
  std::unique_ptr<dist::ProcessGroup> group_;       // a world of one unless a launcher started ranks
  std::unique_ptr<dist::GradientReducer> reducer_;  // null for a world of one (dist::make_gradient_reducer)
  std::unique_ptr<checkpoint::Checkpointer> checkpointer_;  // plan.writes_run only
  std::unique_ptr<TrainingData> data_;
  model::RoFormerForMaskedLM model_{nullptr};    // the fp32 weights
  model::RoFormerForMaskedLM compute_{nullptr};  // what the step runs: model_, or its bf16 copy (param_dtype bf16)
  std::unique_ptr<AdamW> optimizer_;             // holds the state (checkpointed) on every path
  std::unique_ptr<LrSchedule> schedule_;
  LossScaler scaler_;                            // fp16: dynamic loss scaling; otherwise a factor of 1
  MetricsWriter metrics_;                        // rank 0 of a run
  std::optional<TensorBoardSink> tensorboard_;   // rank 0 with logging.tensorboard
  torch::Tensor nonfinite_;             // CUDA: sticky device flag, set by any non-finite step since the last sync
  std::unique_ptr<StepGraphs> graphs_;  // train.cuda_graph on CUDA; null: eager
  StepSums sums_;                       // the step's loss and correct sums, zeroed per step (graphs write them)
  LoopState loop_;
};

}  // namespace roformer::train
