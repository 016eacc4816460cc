// One rank of the multi-process tests in tests/integration/test_dist.cpp, launched once per rank
// with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set (or none of them: a single
// process). Prints what it computed as `key=value` lines; exits non-zero with the error on stderr.
//
//   roformer_dist_worker collectives
//       all_reduce, broadcast, barrier, all_gather and the parameter agreement check.
//   roformer_dist_worker train OUT_DIR STEPS ACCUM BUCKET_MB
//       trains a tiny RoFormerForMaskedLM on two fixed synthetic global batches of kGlobalBatch
//       sequences, in turn: rank r takes rows [r*G/W, (r+1)*G/W), split into ACCUM micro-batches; the loss of each
//       micro-batch is its summed cross-entropy divided by the predicted tokens of the whole step over
//       all ranks; GradientReducer sums the gradients; clipping at a global norm of 1; AdamW. Writes
//       OUT_DIR/params_rank<r>.safetensors.
//   roformer_dist_worker loop TIMEOUT_MS
//       all-reduces forever (prints `ready` after the first), so the test can kill or stop a rank.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/safetensors.h"
#include "dist/agreement.h"
#include "dist/env.h"
#include "dist/gradient_reducer.h"
#include "dist/process_group.h"
#include "model/roformer.h"
#include "model_util.h"

namespace dist = roformer::dist;

namespace {

constexpr int64_t kGlobalBatch = 12;  // G sequences a step (divisible by world size x micro-batches)
constexpr int64_t kSeqLen = 16;       // T
constexpr int64_t kVocab = 64;        // V

dist::ProcessGroupOptions group_options(int64_t timeout_ms) {
  dist::ProcessGroupOptions o;
  o.backend = "gloo";
  o.timeout = std::chrono::milliseconds(timeout_ms);
  o.failure_grace = std::chrono::milliseconds(2000);
  return o;
}

std::string join(const torch::Tensor& t) {
  const auto c = t.to(torch::kFloat64).contiguous();
  std::string out;
  for (int64_t i = 0; i < c.numel(); ++i) {
    out += (i ? "," : "");
    out += std::to_string(c.data_ptr<double>()[i]);
  }
  return out;
}

int run_collectives() {
  const auto env = dist::detect_dist_env();
  dist::ProcessGroup group(env, torch::kCPU, group_options(10000));
  const int r = group.rank(), W = group.world_size();
  std::cout << "backend=" << group.backend() << " rank=" << r << " world=" << W << std::endl;

  // Sum of (r+1) * [1, 10, 100] in float32 and of r in int64.
  auto f = torch::tensor({1.0f, 10.0f, 100.0f}) * static_cast<float>(r + 1);
  auto i = torch::tensor({static_cast<int64_t>(r)});
  std::vector<torch::Tensor> both{f, i};
  group.all_reduce_sum(both);
  std::cout << "all_reduce_f32=" << join(f) << "\nall_reduce_i64=" << join(i) << std::endl;

  // Broadcast from the last rank: everyone ends with its values.
  auto b = torch::full({4}, static_cast<double>(r) + 0.5, torch::kFloat64);
  std::vector<torch::Tensor> bs{b};
  group.broadcast(bs, W - 1);
  std::cout << "broadcast=" << join(b) << std::endl;

  group.barrier();
  std::cout << "barrier=passed" << std::endl;

  const auto gathered = group.all_gather(1.5 * r + 0.25);
  std::string g;
  for (size_t k = 0; k < gathered.size(); ++k) g += (k ? "," : "") + std::to_string(gathered[k]);
  std::cout << "all_gather=" << g << std::endl;

  // Same parameters everywhere, then the last rank perturbs one element by one ulp.
  torch::manual_seed(3);
  std::vector<torch::Tensor> params{torch::randn({5, 7}), torch::randn({3})};
  std::cout << "agree_same=" << dist::check_parameters_agree(group, params).message() << std::endl;
  if (r == W - 1) params[1][2] = std::nextafter(params[1][2].item<float>(), 10.0f);
  std::cout << "agree_perturbed=" << dist::check_parameters_agree(group, params).message() << std::endl;
  // A broadcast from rank 0 repairs it.
  dist::broadcast_parameters(group, params);
  std::cout << "agree_after_broadcast=" << dist::check_parameters_agree(group, params).message() << std::endl;
  return 0;
}

// The synthetic global batch of step s: ids (G, T) and the predicted positions (G, T) bool, whose
// count varies from row to row (so ranks see different token counts and the normalization matters).
void global_batch(int64_t step, torch::Tensor& ids, torch::Tensor& predicted) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + static_cast<uint64_t>(step));
  ids = torch::randint(5, kVocab, {kGlobalBatch, kSeqLen}, gen, torch::kInt64);
  auto rate = torch::linspace(0.05, 0.6, kGlobalBatch).unsqueeze(1);  // (G, 1)
  predicted = torch::rand({kGlobalBatch, kSeqLen}, gen).lt(rate);
  predicted.select(1, 1).fill_(true);  // at least one prediction per row
}

int run_train(const std::string& out_dir, int64_t steps, int64_t accum, double bucket_mb) {
  const auto env = dist::detect_dist_env();
  dist::ProcessGroup group(env, torch::kCPU, group_options(30000));
  const int r = group.rank(), W = group.world_size();
  if (kGlobalBatch % (W * accum) != 0) throw roformer::Error("global batch not divisible by world * accum");
  const int64_t local = kGlobalBatch / W, micro = local / accum;

  // Ranks initialize differently on purpose (rank 0 like the single process); the broadcast below
  // makes every rank start from rank 0's values.
  torch::manual_seed(1234 + static_cast<uint64_t>(r));
  roformer::config::ModelConfig m = roformer::test::two_layer_model_config(32, 2, 64, kSeqLen);
  m.embedding_size = 32;
  roformer::model::RoFormerForMaskedLM model(roformer::model::RoFormerOptions(m, kVocab));
  auto params = model->parameters();
  dist::broadcast_parameters(group, params);
  dist::GradientReducer reducer(group, params, {bucket_mb});
  std::cout << "buckets=" << reducer.num_buckets() << std::endl;
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(3e-3).weight_decay(0.01));

  int64_t overlapped = 0;
  for (int64_t step = 0; step < steps; ++step) {
    torch::Tensor ids, predicted;
    global_batch(step % 2, ids, predicted);  // two batches in turn: something to learn
    ids = ids.narrow(0, r * local, local);
    predicted = predicted.narrow(0, r * local, local);
    // Predicted tokens of the whole step, summed over micro-batches and ranks.
    auto count = predicted.sum().to(torch::kFloat64).reshape({1});
    group.all_reduce_sum(count, "token count all_reduce");
    const double global_tokens = count.item<double>();

    optimizer.zero_grad();
    double loss_sum = 0;
    for (int64_t m = 0; m < accum; ++m) {
      auto mids = ids.narrow(0, m * micro, micro);
      auto mpred = predicted.narrow(0, m * micro, micro).reshape({-1});
      auto positions = mpred.nonzero().reshape({-1});               // (P,)
      auto labels = mids.reshape({-1}).index_select(0, positions);  // (P,)
      auto inputs = mids.clone();
      inputs.view({-1}).index_fill_(0, positions, 4);               // [MASK]
      auto logits = model->forward_sparse(inputs, {}, positions);  // (P, V)
      auto loss = torch::nn::functional::cross_entropy(
                      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)) /
                  global_tokens;
      reducer.set_sync(m == accum - 1);
      loss.backward();
      loss_sum += loss.item<double>();
    }
    reducer.finish();
    overlapped += reducer.buckets_started_in_backward();
    torch::nn::utils::clip_grad_norm_(params, 1.0);
    optimizer.step();
    auto global_loss = torch::tensor({loss_sum}, torch::kFloat64);
    group.all_reduce_sum(global_loss, "loss all_reduce");
    if (group.is_main()) std::printf("step=%lld loss=%.6f\n", static_cast<long long>(step), global_loss.item<double>());
    std::fflush(stdout);
  }
  std::cout << "buckets_started_in_backward=" << overlapped << std::endl;
  std::cout << "agreement=" << dist::check_parameters_agree(group, params).message() << std::endl;
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value().detach());
  roformer::core::save_safetensors(out_dir + "/params_rank" + std::to_string(r) + ".safetensors", named);
  return 0;
}

[[noreturn]] void run_loop(int64_t timeout_ms) {
  const auto env = dist::detect_dist_env();
  dist::ProcessGroup group(env, torch::kCPU, group_options(timeout_ms));
  for (int64_t k = 0;; ++k) {
    auto t = torch::ones({1024});
    group.all_reduce_sum(t, "all_reduce " + std::to_string(k));
    if (k == 0) std::cout << "ready" << std::endl;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    torch::set_num_threads(1);
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "collectives") return run_collectives();
    if (mode == "train" && argc == 6)
      return run_train(argv[2], std::stoll(argv[3]), std::stoll(argv[4]), std::stod(argv[5]));
    if (mode == "loop" && argc == 3) run_loop(std::stoll(argv[2]));
    std::cerr << "usage: roformer_dist_worker collectives | train OUT_DIR STEPS ACCUM BUCKET_MB | loop TIMEOUT_MS\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
}
