// `roformer bench -c CONFIG`: training throughput of the real training step (the same TrainStep as
// `roformer train`, train/step.h) on the config's data or on synthetic batches. Reports
// tokens/s, ms/step with a per-stage breakdown, model FLOPs per step, achieved TFLOP/s, MFU and
// peak memory. A program that prints figures, never a test with a time limit.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace roformer::bench {

struct StepBenchOptions {
  std::string config_path;
  std::vector<std::string> overrides;     // section.key=value
  std::string run_dir;                    // tokenizer + prepared data cache; empty: <train.run_dir>/bench
  int64_t steps = 20;                     // measured steps
  int64_t warmup = 3;                     // steps run before measuring
  bool json = false;                      // one JSON record on stdout instead of the table
  double peak_tflops = 0;                 // 0: known peak of the device for the precision, if any
  bool synthetic = false;                 // random batches (model.vocab_size must be set)
  // The kernel policy's alternatives (model/kernel_policy.h kernel_alternatives()), set once before
  // the step is built: (entry, value) in the order the flags gave them; a switch's value is "".
  std::vector<std::pair<std::string, std::string>> kernel_choices;
  std::string list_variants;              // "all" | "kernels": print the device script's rows (variants.h), run nothing
  bool breakdown = false;                 // CUDA: synchronize between stages to time them
  std::string profile;                    // after measuring: a Kineto trace of profile_steps steps here
  int64_t profile_steps = 3;
};

// Prints the figures; throws roformer::Error for user mistakes.
void run_step_benchmark(const StepBenchOptions& options);

}  // namespace roformer::bench
