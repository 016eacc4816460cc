// Model benchmark (a program, not a test): forward + backward time of one MLM training step for
// RoFormer-base (H 768, 12 layers, 12 heads, I 3072, T 512) on CPU at a small batch, comparing
//   * element-wise rotary (x cos + rotate_half(x) sin) vs the fused form (one complex multiply),
//   * the sparse MLM head (only the P predicted positions) vs the dense head over all B*T positions,
// each set through the kernel policy (model/kernel_policy.h), as `roformer bench` sets it; plus the
// rotary op alone on a (B, N, T, D) query-shaped tensor, where the naive rotation matrices R_m x_m
// (model/rotary.h's reference, which the model never runs) are timed too. Prints Markdown tables.
//
//   build/roformer_model_bench [--batch 2] [--seq 512] [--layers 12] [--vocab 30000] [--iters 3]
//                              [--threads 0]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "model/flops.h"
#include "model/kernel_policy.h"
#include "model/roformer.h"
#include "model/rotary.h"

namespace {

using roformer::model::RoFormerForMaskedLM;
using roformer::model::RoFormerOptions;
using Clock = std::chrono::steady_clock;

struct Args {
  int64_t batch = 2, seq = 512, layers = 12, vocab = 30000, iters = 3, threads = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int64_t v = std::stoll(argv[i + 1]);
    if (k == "--batch") a.batch = v;
    else if (k == "--seq") a.seq = v;
    else if (k == "--layers") a.layers = v;
    else if (k == "--vocab") a.vocab = v;
    else if (k == "--iters") a.iters = v;
    else if (k == "--threads") a.threads = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

struct Timing {
  double mean_ms, min_ms;
};

template <typename F>
Timing time_it(int64_t iters, F&& step) {
  step();  // warm-up (allocator, thread pool)
  std::vector<double> ms;
  for (int64_t i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  double sum = 0;
  for (double m : ms) sum += m;
  return {sum / static_cast<double>(ms.size()), *std::min_element(ms.begin(), ms.end())};
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.threads > 0) torch::set_num_threads(static_cast<int>(a.threads));
  torch::manual_seed(0);
  const int64_t n_pred = std::max<int64_t>(1, (a.batch * a.seq * 15) / 100);  // 15% masking
  roformer::config::ModelConfig base;  // RoFormer-base: H 768, 12 heads, I 3072
  base.num_layers = a.layers;
  base.max_position_embeddings = std::max<int64_t>(512, a.seq);
  auto ids = torch::randint(0, a.vocab, {a.batch, a.seq}, torch::kLong);
  auto positions = torch::randperm(a.batch * a.seq, torch::kLong).narrow(0, 0, n_pred);  // (P,)
  auto labels = torch::randint(0, a.vocab, {n_pred}, torch::kLong);

  std::printf("RoFormer MLM step on CPU: batch %ld, seq %ld, layers %ld, hidden 768, heads 12, vocab %ld, "
              "P %ld predicted, %d threads, %ld timed iterations after 1 warm-up\n\n",
              static_cast<long>(a.batch), static_cast<long>(a.seq), static_cast<long>(a.layers),
              static_cast<long>(a.vocab), static_cast<long>(n_pred), torch::get_num_threads(), static_cast<long>(a.iters));
  std::printf("| variant | rotary | head | mean ms/step | min ms/step | GFLOP/s (model FLOPs) |\n");
  std::printf("|---|---|---|---:|---:|---:|\n");

  struct Variant {
    roformer::model::RotaryImpl rotary;
    bool sparse;
  };
  using roformer::model::RotaryImpl;
  for (const Variant v : {Variant{RotaryImpl::kElementwise, true}, Variant{RotaryImpl::kFused, true},
                          Variant{RotaryImpl::kElementwise, false}}) {
    roformer::model::KernelPolicy policy;
    policy.rotary = v.rotary;
    policy.dense_head = !v.sparse;
    const roformer::model::ScopedKernelPolicy scoped(policy);
    const auto options = RoFormerOptions(base, a.vocab);
    torch::manual_seed(0);
    RoFormerForMaskedLM model(options);
    model->train();
    auto step = [&] {
      model->zero_grad();
      torch::nn::functional::cross_entropy(model->forward_sparse(ids, {}, positions), labels).backward();
    };
    const Timing t = time_it(a.iters, step);
    // FLOPs of the dense variant count the head at all B*T positions.
    const double flops =
        roformer::model::mlm_train_flops_per_step(options, a.batch, a.seq, v.sparse ? n_pred : a.batch * a.seq);
    const std::string rotary = roformer::model::to_string(v.rotary);
    const char* head = v.sparse ? "sparse" : "dense";
    std::printf("| %s rotary, %s head | %s | %s | %.0f | %.0f | %.1f |\n", rotary.c_str(), head, rotary.c_str(), head,
                t.mean_ms, t.min_ms, flops / (t.min_ms * 1e-3) / 1e9);
    std::fflush(stdout);
  }

  // The rotary op alone, forward + backward, on q of shape (B, N, T, D).
  auto table = roformer::model::rotary_table(a.seq, 64);
  auto [sin_pos, cos_pos] = roformer::model::rotary_sin_cos(table, a.seq);
  auto q = torch::randn({a.batch, 12, a.seq, 64}, torch::requires_grad());
  std::printf("\n| rotary op alone, (B, N, T, D) = (%ld, 12, %ld, 64), fwd + bwd | mean ms | min ms |\n|---|---:|---:|\n",
              static_cast<long>(a.batch), static_cast<long>(a.seq));
  for (const char* impl : {"elementwise", "fused", "matrix"}) {
    auto rotate = [&]() -> torch::Tensor {
      if (std::strcmp(impl, "matrix") == 0) return roformer::model::apply_rotary_matrix(q, sin_pos, cos_pos);
      if (std::strcmp(impl, "fused") == 0) return roformer::model::apply_rotary_fused(q, sin_pos, cos_pos, /*seq_dim=*/-2);
      return roformer::model::apply_rotary(q, sin_pos, cos_pos);
    };
    const Timing t = time_it(a.iters * 10, [&] {
      rotate().sum().backward();
      q.mutable_grad().reset();
    });
    std::printf("| %s | %.2f | %.2f |\n", impl, t.mean_ms, t.min_ms);
  }
  return 0;
}
