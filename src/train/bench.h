// `roformer bench -c CONFIG`: training throughput of the real training step (the same TrainStep as
// `roformer train`, train/step.h) on the config's data or on synthetic batches. Reports
// tokens/s, ms/step with a per-phase breakdown, model FLOPs per step, achieved TFLOP/s, MFU and
// peak memory. A program that prints figures, never a test with a time limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::train {

struct TrainBenchOptions {
  std::string config_path;
  std::vector<std::string> overrides;     // section.key=value
  std::string run_dir;                    // tokenizer + prepared data cache; empty: <train.run_dir>/bench
  int64_t steps = 20;                     // measured steps
  int64_t warmup = 3;                     // steps run before measuring
  bool json = false;                      // one JSON record on stdout instead of the table
  double peak_tflops = 0;                 // 0: known peak of the device for the precision, if any
  bool synthetic = false;                 // random batches (model.vocab_size must be set)
  // The kernel policy's alternatives (model/kernel_policy.h), set once before the step is built:
  std::string rotary = "auto";            // auto | elementwise | fused
  bool separate_qkv = false;              // CUDA: three QKV GEMMs instead of one
  bool separate_bias_add = false;         // CUDA: Linear as matmul + `+= bias` (nn::Linear::forward)
  std::string attention_kernel = "auto";  // auto (LibTorch's choice) | flash | cudnn | efficient | math
  bool dense_head = false;                // the MLM head on all B*T positions
  bool fused_layer_norm = false;          // the layers' residual + dropout + LayerNorm as one op
  bool fused_rotary = false;              // q and k rotated by one op on the packed projection
  bool fused_cross_entropy = false;       // the MLM loss and hits from the logits in their dtype
  bool fused_embedding = false;           // the embeddings' sum + LayerNorm + dropout as one op
  bool fused_all = false;                 // the four above
  bool breakdown = false;                 // CUDA: synchronize between phases to time them
  std::string profile;                    // after measuring: a Kineto trace of profile_steps steps here
  int64_t profile_steps = 3;
};

// Prints the figures; throws roformer::Error for user mistakes.
void run_train_benchmark(const TrainBenchOptions& options);

}  // namespace roformer::train
