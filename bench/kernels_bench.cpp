// `roformer bench kernels`: see kernels_bench.h. Each fused op of src/kernels against its ATen path at
// RoFormer-base shapes (16384 tokens per step, H 768, 12 heads, V 32000, 15% of the positions
// predicted, bf16, dropout 0.1), forward + backward per call:
//   * the bytes the fused kernels move (inputs read once, outputs written once: the op's floor),
//     and that floor in microseconds at --bandwidth (3.0e12 B/s, what an H100 copies), per call and
//     per training step (calls per step: 24 LayerNorms, 12 rotaries, 1 loss, 1 embedding);
//   * on a GPU with the kernels: microseconds per call of each path (median of --iters timed
//     calls, each bracketed by device synchronizations, after --warmup), achieved GB/s (the fused
//     bytes over each path's time) and the GPU operations each path launches per call (kernels,
//     copies, fills: counted by the Kineto profiler over one call).
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/kernels_bench.h"
#include "core/error.h"
#include "core/file.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/layer_norm.h"
#include "kernels/rotary.h"
#include "kernels/triton_runtime.h"

namespace roformer::bench {

namespace {

using namespace roformer::kernels;
using torch::Tensor;

constexpr int64_t kTokens = 16384, kH = 768, kHeads = 12, kV = 32000, kPredicted = 2458;  // 15% of 16384
constexpr int64_t kSeq = 512, kElem = 2;                                                   // bf16 bytes

// One op: its shapes, the fused kernels' bytes per call (forward + backward), its calls per step,
// and (on a GPU) a forward + backward call of either path.
struct Op {
  std::string name, shape;
  double bytes;
  int64_t per_step;
  std::function<void(Backend)> call;
};

// G = 4 programs per SM write (2, G, H) fp32 partial sums of gamma and beta, read once more.
double partial_bytes(int64_t width, int64_t sms) { return 2.0 * 2 * 4 * sms * width * 4; }

std::vector<Op> ops(const torch::Device& device, int64_t sms) {
  const bool gpu = device.is_cuda();
  auto o = torch::TensorOptions().device(device).dtype(torch::kBFloat16);
  const double M = kTokens, H = kH;
  std::vector<Op> out;
  // Post-LN block: z = r + dropout(x), y = LN(z). Forward reads x, r, writes z, y (+ mean, rstd);
  // backward reads dy, z, writes dr, dx.
  out.push_back({"residual + dropout + LayerNorm", "(16384, 768)", 8 * M * H * kElem + 4 * 4 * M + partial_bytes(kH, sms), 24,
                 [=](Backend b) {
                   static auto x = torch::randn({kTokens, kH}, o).requires_grad_(), r = torch::randn({kTokens, kH}, o).requires_grad_();
                   static auto g = torch::ones({kH}, o).requires_grad_(), beta = torch::zeros({kH}, o).requires_grad_();
                   static auto dy = torch::randn({kTokens, kH}, o);
                   auto y = residual_dropout_layer_norm(x, r, g, beta, 0.1, 1e-12, b).y;
                   torch::autograd::grad({y}, {x, r, g, beta}, {dy});
                 }});
  // Rotary: q and k read, rotated q and k written; the backward the same on their gradient.
  out.push_back({"rotary of q and k", "(32, 512, 3, 12, 64)", 8 * M * H * kElem, 12, [=](Backend b) {
                   static auto qkv = torch::randn({kTokens / kSeq, kSeq, 3, kHeads, kH / kHeads}, o).requires_grad_();
                   static auto table = torch::randn({kSeq, kH / kHeads}, o.dtype(torch::kFloat));
                   static auto gy = torch::randn({kTokens / kSeq, kSeq, 2, kHeads, kH / kHeads}, o);
                   auto y = rotary_qk(qkv.split_with_sizes({2, 1}, 2)[0], table, b);
                   torch::autograd::grad({y}, {qkv}, {gy});
                 }});
  // Loss: the logits read forward and backward, their gradient written.
  out.push_back({"cross-entropy (loss, hits, dlogits)", "(2458, 32000)", 3.0 * kPredicted * kV * kElem, 1, [=](Backend b) {
                   static auto logits = (4 * torch::randn({kPredicted, kV}, o.dtype(torch::kFloat))).to(o).requires_grad_();
                   static auto labels = torch::randint(0, kV, {kPredicted}, o.dtype(torch::kLong));
                   auto r = cross_entropy_sum(logits, labels, b);
                   torch::autograd::grad({r.loss}, {logits});
                 }});
  // Embeddings: rows gathered, z and y written; backward reads dy, z, writes z's gradient (ATen's
  // scatter into the tables follows in both paths and is not counted).
  out.push_back({"embeddings + LayerNorm + dropout", "(32, 512) ids, (32000, 768)", 6 * M * H * kElem + 4 * 4 * M + partial_bytes(kH, sms), 1,
                 [=](Backend b) {
                   static EmbeddingInputs in = [&] {
                     EmbeddingInputs e;
                     e.ids = torch::randint(0, kV, {kTokens / kSeq, kSeq}, o.dtype(torch::kLong));
                     e.word = torch::randn({kV, kH}, o).requires_grad_();
                     e.type = torch::randn({2, kH}, o).requires_grad_();
                     return e;
                   }();
                   static auto g = torch::ones({kH}, o).requires_grad_(), beta = torch::zeros({kH}, o).requires_grad_();
                   static auto dy = torch::randn({kTokens / kSeq, kSeq, kH}, o);
                   auto y = embedding_layer_norm(in, g, beta, 0.1, 1e-12, b);
                   torch::autograd::grad({y}, {in.word, in.type, g, beta}, {dy});
                 }});
  if (!gpu)
    for (auto& op : out) op.call = nullptr;
  return out;
}

double median_us(const std::function<void(Backend)>& call, Backend b, const KernelsBenchOptions& a) {
  for (int64_t i = 0; i < a.warmup; ++i) call(b);
  std::vector<double> us;
  for (int64_t i = 0; i < a.iters; ++i) {
    torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    call(b);
    torch::cuda::synchronize();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// GPU activities (kernels, copies, fills) of one call, from the Kineto profiler.
int64_t gpu_ops(const std::function<void(Backend)>& call, Backend b) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  call(b);
  torch::cuda::synchronize();
  auto result = prof::disableProfiler();
  int64_t n = 0;
  for (const auto& e : result->events()) n += e.deviceType() == c10::DeviceType::CUDA;
  return n;
}

// The options' own checks, before anything runs: the --json file's folder must take a file.
void check_options(const KernelsBenchOptions& a) {
  if (a.iters < 1) throw Error("--iters must be at least 1, got " + std::to_string(a.iters));
  if (a.warmup < 0) throw Error("--warmup must be at least 0, got " + std::to_string(a.warmup));
  if (!(a.bandwidth > 0)) throw Error("--bandwidth must be a positive number of bytes per second (an H100 copies 3e12)");
  if (a.json.empty()) return;
  namespace fs = std::filesystem;
  const fs::path path(a.json);
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error("--json " + a.json + " is a directory; give a file name, e.g. --json " + (path / "kernels_bench.json").string());
  if (path.has_parent_path() && !fs::is_directory(path.parent_path(), ec))
    throw Error("--json " + a.json + ": there is no folder " + path.parent_path().string() +
                "; make it first or give a file in an existing folder");
}

// One op's row of the table (and its record): the floor, then each path's time on a GPU.
nlohmann::json measure_op(const Op& op, const KernelsBenchOptions& a, bool gpu, double* step_floor) {
  const double floor_us = op.bytes / a.bandwidth * 1e6;
  *step_floor += floor_us * static_cast<double>(op.per_step) / 1e3;
  nlohmann::json r = {{"op", op.name}, {"shape", op.shape}, {"bytes", op.bytes}, {"floor_us", floor_us}, {"per_step", op.per_step}};
  std::printf("| %s | %s | %.1f | %.1f | %lld | %.2f |", op.name.c_str(), op.shape.c_str(), op.bytes / 1e6, floor_us,
              static_cast<long long>(op.per_step), floor_us * static_cast<double>(op.per_step) / 1e3);
  if (gpu) {
    const double fused = median_us(op.call, Backend::kTriton, a), aten = median_us(op.call, Backend::kAten, a);
    const int64_t n_fused = gpu_ops(op.call, Backend::kTriton), n_aten = gpu_ops(op.call, Backend::kAten);
    r.update({{"fused_us", fused}, {"aten_us", aten}, {"fused_gbs", op.bytes / fused / 1e3},
              {"aten_gbs", op.bytes / aten / 1e3}, {"gpu_ops_fused", n_fused}, {"gpu_ops_aten", n_aten}});
    std::printf(" %.1f | %.0f | %.1f | %.0f | %lld / %lld |", fused, op.bytes / fused / 1e3, aten, op.bytes / aten / 1e3,
                static_cast<long long>(n_fused), static_cast<long long>(n_aten));
  }
  std::printf("\n");
  return r;
}

}  // namespace

void run_kernels_benchmark(const KernelsBenchOptions& a) {
  check_options(a);
  const bool gpu = !a.dry_run && torch::cuda::is_available() && triton_kernels_built();
  const torch::Device device = gpu ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const int64_t sms = gpu ? device_sm_count(device) : 132;  // H100 SXM: 132 SMs
  std::printf("fused kernels: %s; %s\n", triton_kernels_built() ? "built" : "not built",
              gpu ? "timing on the GPU" : "bytes and floors only (--dry-run, no GPU or no kernels)");
  std::printf("| op | shape | fused MB/call | floor us @%.1f TB/s | calls/step | step floor ms |%s\n", a.bandwidth / 1e12,
              gpu ? " fused us | GB/s | ATen us | GB/s | GPU ops fused / ATen |" : "");
  std::printf("|---|---|---:|---:|---:|---:|%s\n", gpu ? "---:|---:|---:|---:|---:|" : "");
  nlohmann::json records = nlohmann::json::array();
  double step_floor = 0;
  for (const auto& op : ops(device, sms)) records.push_back(measure_op(op, a, gpu, &step_floor));
  std::printf("step floor of these ops: %.2f ms per 16384-token step (docs/benchmarks.md: 23 ms of memory-bound kernels today)\n",
              step_floor);
  std::fflush(stdout);
  // An earlier file of that name is replaced only once the new one is whole.
  if (!a.json.empty()) core::write_file_atomic(a.json, records.dump(1) + "\n");
}

}  // namespace roformer::bench
