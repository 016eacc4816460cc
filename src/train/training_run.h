// The training run of `roformer train`: a TrainStep (train/step.h) and everything around it that a
// run writes and decides: the run directory's files (train.log, config.yaml), the data
// (train/training_data.h), checkpoints, metrics.jsonl, TensorBoard, evaluation, the cadence of
// logging, evaluation and saving (train/cadence.h) and the stop signals. Built whole from a Plan
// (train/plan.h): the device and process group, the run directory, the data, the step and the
// checkpoint or --init-from weights it starts from. `roformer bench` and the tests build a step
// without a run. Includes LibTorch, so only train/ sources include it; the CLI uses launch.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "metrics/jsonl.h"
#include "metrics/records.h"
#include "train/length_phases.h"
#include "train/placement.h"
#include "train/plan.h"
#include "train/step.h"
#include "train/tensorboard_sink.h"

namespace roformer::checkpoint {
class Checkpointer;
struct CheckpointContents;
}  // namespace roformer::checkpoint

namespace roformer::train {

class ConsoleSink;
class MetricsWindow;
class TrainingData;

class TrainingRun {
 public:
  // Builds everything the plan describes; throws roformer::Error for what cannot be built (a device
  // that does not exist, missing data, a checkpoint that does not fit), before the first step.
  explicit TrainingRun(Plan plan);
  ~TrainingRun();

  // The steps with their logs, metrics, evaluations and checkpoints, until train.steps or a stop
  // signal (then saved). Started by torchrun or srun with several processes, it is one rank of a
  // data-parallel run: see docs/distributed.md. Throws roformer::Error for what stops it early (a
  // non-finite step, a failed write), saying how to go on.
  void run();

 private:
  // Construction, in order (training_run.cpp).
  void setup_run_dir();            // train.log, config.yaml, the checkpointer
  void check_ranks_start_alike();  // collective: same resolved config and checkpoint on every rank
  void setup_data();               // rank 0 first: it trains the tokenizer and prepares the data
  void setup_starting_point();     // the --init-from weights or the checkpoint, metrics, TensorBoard
  void resume();                   // from plan.resume: every component restores its own state
  void save_checkpoint(const std::string& reason);
  checkpoint::CheckpointContents checkpoint_contents();

  // The loop (train_loop.cpp): evaluation, records, the checks and reports between steps.
  void run_eval();
  // A record to every sink (rank 0: the console, metrics.jsonl, TensorBoard); a failed write stops
  // the run (stop_for_failed_write).
  void record(const metrics::TrainRecord& record);
  void record(const metrics::EvalRecord& record);
  template <class Record>
  void send(const Record& record);
  std::vector<metrics::MetricsSink*> sinks();
  // A write the run depends on failed (metrics.jsonl, train.log): saves a checkpoint if it still can
  // (a single process), then throws roformer::Error saying what failed, what was kept and how to go on.
  [[noreturn]] void stop_for_failed_write(const std::string& what);
  // MFU of steps with n_pred predicted positions taking ms_per_step (model::model_flops_utilization
  // over the peak of every rank's device); none where the device's peak is unknown (the CPU, GPUs
  // absent from core::known_peak_tflops).
  std::optional<double> model_flops_utilization(double n_pred, double ms_per_step) const;
  // Throws on a non-finite step; `before`: the steps done when it started, last_synced: the last
  // step whose values were read back.
  void check_finite(const StepResult& r, int64_t before, int64_t last_synced) const;
  void log_step(const StepResult& r, MetricsWindow& window);
  bool stop_if_asked(const StepResult& r);
  // The end of a run that trained to its last step: the summary to every sink, then the last lines.
  void finish(const MetricsWindow& window);
  metrics::RunSummary summary(const MetricsWindow& window) const;
  void report_done() const;
  // Sequences per optimizer step over all ranks: batch_size x grad_accum x processes, of the length
  // phase the data serves (train.phases).
  int64_t global_batch() const;
  // Before a step: the length phase of that step entered (the data's loader switched, said once).
  void enter_phase_of_next_step();
  // "B sequences x T tokens per step (...) | N training sequences per epoch" of the current phase.
  std::string shape_description() const;
  int world_size() const { return placement_.world_size(); }
  bool main_rank() const { return placement_.main_rank(); }

  Plan plan_;                 // as given, train.param_dtype resolved for the device (placement_)
  LengthPhases phases_;       // train.phases: the phase of a step, the data's shape, per-phase figures
  Placement placement_;       // the device and the process group
  std::unique_ptr<checkpoint::Checkpointer> checkpointer_;  // RUN/checkpoints
  std::unique_ptr<TrainingData> data_;
  std::unique_ptr<TrainStep> step_;
  metrics::JsonlSink metrics_;                  // rank 0
  std::optional<TensorBoardSink> tensorboard_;  // rank 0 with logging.tensorboard
  std::unique_ptr<ConsoleSink> console_;        // made by run(): its elapsed time is the training's
  std::optional<metrics::EvalRecord> last_eval_;   // the latest evaluation of this session (written, not restored)
  std::optional<metrics::TrainRecord> last_train_;  // the latest logging step of this session
};

}  // namespace roformer::train
