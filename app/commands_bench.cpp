// `roformer bench -c CONFIG`: training throughput of the real training step. Registered before
// the data commands, which add `roformer bench data` to the same group.
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "train/bench.h"

namespace roformer::app {

void register_bench_commands(CLI::App& app) {
  auto o = std::make_shared<train::TrainBenchOptions>();
  auto* bench = app.add_subcommand(
      "bench", "Benchmarks that print figures: `bench -c CONFIG` times training steps (tokens/s, MFU), `bench data` "
                 "the data pipeline (prepare and loader tokens/s)");
  bench->require_subcommand(0, 1);
  bench->add_option("-c,--config", o->config_path, "YAML config to benchmark (the same step as `roformer train`)");
  bench->add_option("--set", o->overrides, "Override a config key: section.key=value (repeatable)");
  bench->add_option("--steps", o->steps, "Measured steps")->capture_default_str();
  bench->add_option("--warmup", o->warmup, "Steps before measuring")->capture_default_str();
  bench->add_flag("--json", o->json, "Print one JSON record instead of the table");
  bench->add_option("--peak-tflops", o->peak_tflops,
                    "Peak TFLOP/s for MFU (default: known for H100/H200/A100; none on the CPU)");
  bench->add_flag("--synthetic", o->synthetic, "Random token batches (needs model.vocab_size); no tokenizer or corpus");
  bench->add_option("--rotary", o->rotary,
                    "auto (fused on CUDA, elementwise on the CPU) | elementwise | fused (one complex multiply)")
      ->capture_default_str();
  bench->add_option("--attention-kernel", o->attention_kernel,
                    "auto (LibTorch's choice) | flash | cudnn | efficient | math: allow only this SDPA kernel")
      ->capture_default_str();
  bench->add_flag("--separate-bias-add", o->separate_bias_add,
                  "CUDA: Linear layers as matmul then `+= bias` (nn::Linear::forward) instead of the bias in the GEMM");
  bench->add_flag("--separate-qkv", o->separate_qkv, "CUDA: three q/k/v GEMMs instead of the fused one");
  bench->add_flag("--dense-head", o->dense_head, "MLM head over all B*T positions instead of the predicted ones");
  // The fused ops of issue 38 (docs/kernels.md): Triton kernels on CUDA, their ATen paths on the CPU.
  bench->add_flag("--fused-layer-norm", o->fused_layer_norm, "The layers' residual + dropout + LayerNorm as one op");
  bench->add_flag("--fused-rotary", o->fused_rotary, "q and k rotated by one op on the packed QKV projection");
  bench->add_flag("--fused-cross-entropy", o->fused_cross_entropy,
                  "The MLM loss and hits from the logits in their dtype (no fp32 copy)");
  bench->add_flag("--fused-embedding", o->fused_embedding, "The embeddings' sum + LayerNorm + dropout as one op");
  bench->add_flag("--fused-all", o->fused_all, "All four --fused-* ops");
  bench->add_flag("--breakdown", o->breakdown, "CUDA: synchronize between phases to time data/forward/backward/optimizer");
  bench->add_option("--profile", o->profile,
                    "After the measured steps, profile --profile-steps more (CPU + CUDA) into this Chrome trace "
                    "(.json; summarize with scripts/profile_summary.py)");
  bench->add_option("--profile-steps", o->profile_steps, "Steps in the --profile trace")->capture_default_str();
  bench->add_option("--run-dir", o->run_dir, "Tokenizer and prepared-data cache (default: <train.run_dir>/bench)");
  bench->callback([bench, o] {
    if (!bench->get_subcommands().empty()) return;  // `roformer bench data` ran instead
    train::run_train_benchmark(*o);
  });
}

}  // namespace roformer::app
