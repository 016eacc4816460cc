// The Trainer, shared by `roformer train` (Trainer::run: the whole run with checkpoints, metrics and
// evaluation) and `roformer bench` (set up, then train_step() in a loop): both run the very same
// step. Includes LibTorch, so only train/ sources include it; the CLI uses launch.h.
//
// Setup order: setup_device(), then setup_data() (tokenizer + prepared corpus + loader) or
// use_synthetic_data(), then setup_model_and_optimizer(). run() does all of it plus the run dir.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "core/random.h"
#include "data/corpus.h"
#include "data/loader.h"
#include "data/tokenizer.h"
#include "dist/env.h"
#include "model/roformer.h"
#include "checkpoint/checkpointer.h"
#include "train/evaluate.h"
#include "train/init_from.h"
#include "train/loss_scaler.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/step_graphs.h"
#include "train/tensorboard_sink.h"

namespace roformer::dist {
class ProcessGroup;
class GradientReducer;
}  // namespace roformer::dist

namespace roformer::train {

class MetricsWindow;
class ProgressReporter;

// Ends the phases of a step (StepTimings): seconds since the previous end, with a device
// synchronize first when timings are to be exact (Trainer::set_sync_timings).
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
// only meaningful with Trainer::set_sync_timings(true) (a device synchronize at each boundary);
// without it kernels still run when the host moves on and the time lands in a later phase.
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

// Options that exist only to measure the cost of a design choice (`roformer bench`).
struct StepVariant {
  model::Kernels kernels;     // the model's kernels (model/options.h)
  bool auto_rotary = true;    // kernels.rotary chosen by the device: fused on CUDA, elementwise on the CPU
  bool dense_head = false;    // MLM head on all B*T positions, then gathered
};

// Random batches with the loader's shape: [CLS] x [SEP] without padding, exactly
// round(mask_prob * (T - 2)) predicted positions per sequence, replaced 80/10/10 ([MASK] / random
// / kept, per masking.*). Token ids are drawn from the non-special range [5, V). Own RNG: the
// global LibTorch generator (dropout) is not touched.
class SyntheticBatches {
 public:
  SyntheticBatches(int64_t vocab_size, const data::LoaderOptions& options);
  data::Batch next();

 private:
  int64_t vocab_size_;
  data::LoaderOptions options_;
  core::SplitMix64 rng_;
};

class Trainer {
 public:
  Trainer(config::Config config, std::string run_dir, std::string resume_dir, std::string config_origin);
  ~Trainer();

  // The whole training run (writes the run dir, checkpoints, metrics). Returns the exit code.
  // Started by torchrun or srun with several processes (dist::detect_dist_env), it is one rank of a
  // data-parallel run: see docs/distributed.md.
  int run();

  // Building blocks (run() calls them; `roformer bench` calls them without a run dir of its own).
  void setup_device();
  void setup_data();                        // tokenizer, prepared train/valid data, loader
  void use_synthetic_data(int64_t vocab_size);  // instead of setup_data(); model.vocab_size = vocab_size
  void set_variant(const StepVariant& variant) { variant_ = variant; }  // before setup_model_and_optimizer
  // A new run from these weights and their tokenizer (--init-from); before run().
  void set_init_source(const InitSource& source) { init_ = source; }
  void setup_model_and_optimizer();
  void set_sync_timings(bool sync) { sync_timings_ = sync; }  // before setup_model_and_optimizer (no CUDA graphs then)
  // Tests only: CPU steps take the sync-free path that CUDA steps take (device-side clipping, the
  // sticky non-finite flag, no read-back), so its logic is tested on a machine without a GPU.
  void set_sync_free_on_cpu_for_tests(bool on) { sync_free_on_cpu_ = on; }
  // One optimizer step (grad_accum micro-batches). host_sync false lets a CUDA bf16/fp32 step run
  // without reading anything back (see train_step in trainer.cpp); CPU and fp16 steps always sync.
  StepResult train_step(bool host_sync = true);

  const config::Config& config() const { return cfg_; }
  const torch::Device& device() const { return device_; }
  // The weights (fp32: what checkpoints save and the optimizer updates).
  model::RoFormerForMaskedLM& model() { return model_; }
  // The model the step runs: model() itself, or its bf16 copy with train.param_dtype: bf16.
  model::RoFormerForMaskedLM& compute_model() { return compute_; }
  bool uses_fused_adamw() const { return optimizer_->fused(); }
  // The step's CUDA graphs (train.cuda_graph), or null where the step runs eagerly.
  const StepGraphs* cuda_graphs() const { return graphs_.get(); }
  // AdamW's step count (of the first parameter) as a checkpoint saves it: the updates applied.
  int64_t adamw_step_count();
  int world_size() const { return env_.world_size; }
  // Sequences per optimizer step over all ranks: batch_size x grad_accum x processes.
  int64_t global_batch() const { return cfg_.train.batch_size * cfg_.train.grad_accum * world_size(); }
  bool main_rank() const { return env_.rank == 0; }

 private:
  void setup_run_dir();
  void setup_distributed();  // process group (world of one: identity)
  void check_ranks_start_alike();  // collective: same resolved config and checkpoint on every rank
  void setup_tokenizer();
  void check_memory(int64_t vocab_size) const;  // train/memory_check.h: refuses what cannot fit the device
  std::shared_ptr<const data::PreparedCorpus> prepare(const std::vector<std::string>& files, const std::string& name);
  void load_checkpoint(const std::string& dir);
  void save_checkpoint(const std::string& reason);
  checkpoint::CheckpointContents checkpoint_contents();
  void run_eval();
  void record(const nlohmann::json& rec);  // a metrics record: metrics.jsonl and TensorBoard (rank 0)
  // A write the run depends on failed (metrics.jsonl, train.log): saves a checkpoint if it still can
  // (a single process), then throws roformer::Error saying what failed, what was kept and how to go on.
  [[noreturn]] void stop_for_failed_write(const std::string& what);
  void check_checkpoints_writable() const;
  // MFU of a logging window (model FLOPs per step / mean step time / peak of every rank's device);
  // none where the device's peak is unknown (the CPU, GPUs absent from known_peak_tflops).
  std::optional<double> model_flops_utilization(int64_t n_pred, double ms_per_step) const;
  // Trainer::run in parts: everything before the first step, then per step the checks and actions.
  void start_run();
  void check_finite(const StepResult& r, int64_t last_synced) const;  // throws on a non-finite step
  void log_step(const StepResult& r, MetricsWindow& window, ProgressReporter& progress);
  bool stop_if_asked(const StepResult& r);
  void report_done() const;
  data::Batch next_batch();
  // train_step in parts: the batches, forward + backward, then one of the two exits of the update.
  struct StepSums {
    torch::Tensor loss, correct;  // float64 on the device: summed cross entropy, correct predictions
  };
  std::vector<data::Batch> step_batches(StepResult& r);
  // abandon_on_stop: give up between micro-batches when a stop signal arrives (r.abandoned).
  StepSums forward_backward(const std::vector<data::Batch>& micro, StepResult& r, PhaseClock& clock,
                            bool abandon_on_stop = false);
  // One micro-batch on the device: forward, loss, backward (loss scaled by loss_factor), the sums,
  // the gradients accumulated. What a micro-batch's CUDA graph captures.
  void micro_step(const MicroInputs& in, double loss_factor, const StepSums& sums,
                  const std::function<void()>& after_forward = {});
  void setup_cuda_graphs();  // graphs_, where train.cuda_graph can apply (see there)
  std::vector<torch::Tensor> unscaled_gradients();
  void update_unsynced();  // gradient norm, clip, non-finite flag, update: no read-back (a graph captures it)
  void update_synced(std::vector<torch::Tensor>& grads, const torch::Tensor& norm, StepSums sums, StepResult& r);

  config::Config cfg_;
  std::string run_dir_;
  std::string resume_dir_;
  std::optional<InitSource> init_;
  std::string config_origin_;
  std::string ckpt_dir_;
  torch::Device device_{torch::kCPU};
  dist::DistEnv env_;                               // a single process unless run() finds a launcher
  std::unique_ptr<dist::ProcessGroup> group_;       // setup_device(): a world of one unless a launcher started ranks
  std::unique_ptr<dist::GradientReducer> reducer_;  // null for a world of one (dist::make_gradient_reducer)
  std::unique_ptr<checkpoint::Checkpointer> checkpointer_;      // run() only

  std::optional<data::Tokenizer> tokenizer_;
  std::shared_ptr<const data::PreparedCorpus> train_corpus_, valid_corpus_;
  std::unique_ptr<data::MlmLoader> loader_;
  std::unique_ptr<SyntheticBatches> synthetic_;
  std::vector<data::Batch> eval_batches_;
  model::RoFormerForMaskedLM model_{nullptr};    // the fp32 weights
  model::RoFormerForMaskedLM compute_{nullptr};  // what the step runs: model_, or its bf16 copy (param_dtype bf16)
  std::unique_ptr<AdamW> optimizer_;             // holds the state (checkpointed) on every path
  std::unique_ptr<LrSchedule> schedule_;
  MetricsWriter metrics_;
  std::optional<TensorBoardSink> tensorboard_;  // rank 0 with logging.tensorboard, from start_run on
  StepVariant variant_;
  bool sync_timings_ = false;
  bool sync_free_on_cpu_ = false;
  torch::Tensor nonfinite_;         // CUDA: sticky device flag, set by any non-finite step since the last sync
  std::unique_ptr<StepGraphs> graphs_;  // train.cuda_graph on CUDA; null: eager
  StepSums sums_;                   // the step's loss and correct sums, zeroed per step (graphs write them)

  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  LossScaler scaler_;  // fp16: dynamic loss scaling; otherwise a factor of 1
  int64_t fault_nonfinite_step_ = -1;  // ROFORMER_FAULT_NONFINITE_GRAD_AT_STEP (tests only)
  int64_t fault_oom_step_ = -1;        // ROFORMER_FAULT_OOM_AT_STEP (tests only)
  std::optional<EvalResult> last_eval_;
};

}  // namespace roformer::train
