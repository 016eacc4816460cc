// `roformer bench -c CONFIG`: see step_bench.h. Every figure comes from whole steps of the TrainStep
// (train/step.h), built with its device and a batch source (the config's prepared data, or synthetic
// batches) and no run around it, under the kernel policy the flags set.
//
// Timing: tokens/s and ms/step are wall clock over whole steps, data loading included. On the CPU
// every step ends with its host sync, so per-step times and the stage breakdown are exact. On CUDA
// the measured steps run without host sync (as in `roformer train` between logging steps) and one
// synchronize closes the measurement: ms/step is then the mean only; --breakdown adds a
// synchronize at every stage boundary (which itself costs a little) to time the stages.
#include "bench/step_bench.h"

#include <torch/torch.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/config.h"
#include "core/device.h"
#include "core/peak_memory.h"
#include "core/error.h"
#include "core/logging.h"
#include "dist/env.h"
#include "kernels/op_paths.h"
#include "model/flops.h"
#include "model/kernel_policy.h"
#include "train/optimizer.h"
#include "train/placement.h"
#include "train/run_config.h"
#include "train/step.h"
#include "train/synthetic.h"
#include "train/training_data.h"
#include "bench/variants.h"

namespace roformer::bench {
namespace fs = std::filesystem;
using nlohmann::json;
using namespace roformer::train;  // the step bench measures train/'s step

namespace {
// What the bench measures: the training step with its device and batches, and no run around it.
struct BenchedStep {
  config::Config cfg;  // validated, train.param_dtype resolved for the device
  std::unique_ptr<Placement> placement;
  std::unique_ptr<BatchSource> batches;  // the config's prepared data, or synthetic batches
  std::unique_ptr<TrainStep> step;

  StepResult run(bool host_sync) { return step->run(*batches, host_sync); }
  const c10::Device& device() const { return placement->device(); }
};

// Where the profiler writes the trace first: beside `path`, renamed over it once it is whole.
std::string partial_trace_path(const std::string& path) { return fmt::format("{}.partial-{}.json", path, ::getpid()); }

// --profile's destination, checked before anything is measured: its folder is made and takes a file.
void check_profile_path(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec))
    throw Error(fmt::format("--profile {} is a directory; give a file name, e.g. --profile {}", path,
                            (p / "trace.json").string()));
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  const std::string probe = partial_trace_path(path);
  const int fd = ec ? -1 : ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(fmt::format("--profile {}: cannot write the trace there ({}); give a path in a writable folder", path,
                            ec ? ec.message() : std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

// Runs `steps` more training steps under the Kineto profiler (host ops and, on CUDA, kernels and
// memory copies) and writes a Chrome trace to `path`. Outside the measured window: profiling slows
// the host side, so it never touches the reported figures. The profiler reports no failure to write
// (it logs one), so the trace is written beside `path`, checked, then renamed into place.
void profile_steps(BenchedStep& bench, int64_t steps, const std::string& path) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  std::set<ActivityType> activities{ActivityType::CPU};
  if (bench.device().is_cuda()) activities.insert(ActivityType::CUDA);
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO, /*report_input_shapes=*/true);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  for (int64_t i = 0; i < steps; ++i) bench.run(/*host_sync=*/i + 1 == steps);
  core::synchronize(bench.device());
  auto result = prof::disableProfiler();
  const std::string partial = partial_trace_path(path);
  result->save(partial);
  std::error_code ec;
  const auto size = fs::file_size(partial, ec);
  std::string why = ec ? ec.message() : size == 0 ? "the trace is empty" : "";
  if (why.empty()) fs::rename(partial, path, ec);
  if (why.empty() && ec) why = ec.message();
  if (!why.empty()) {
    fs::remove(partial, ec);
    throw Error(fmt::format("--profile {}: the profiler's trace could not be written ({}: a full disk, or a folder "
                            "that became unwritable?); no trace was written", path, why));
  }
  spdlog::info("bench: profile of {} step(s) written to {} (summary: scripts/profile_summary.py {})", steps, path, path);
}

// The measured steps, summed.
struct Measurement {
  int64_t tokens = 0, n_pred = 0;
  double seconds = 0;      // wall clock over all measured steps
  double min_step = 1e300;  // fastest single step (exact only when every step synchronizes)
  StepTimings stages;      // summed per stage of the step
  StepResult last;         // the last step (synchronized: its loss is read back)
};

// The bench's own flags; the config's are checked by validate_run_config.
void check_bench_options(const StepBenchOptions& o) {
  if (o.config_path.empty())
    throw Error("roformer bench needs a config: -c configs/tiny.yaml (or `roformer bench data`, `roformer bench kernels`)");
  if (o.steps < 1) throw Error(fmt::format("--steps must be at least 1, got {}", o.steps));
  if (o.warmup < 0) throw Error(fmt::format("--warmup must be at least 0, got {}", o.warmup));
  for (const auto& [entry, value] : o.kernel_choices) {
    const model::KernelAlternative* row = model::find_kernel_alternative(entry);
    if (!row) throw Error(fmt::format("no kernel alternative '{}' (model/kernel_policy.h)", entry));
    if (auto error = model::kernel_choice_error(*row, value))
      throw Error(*error + (value == "matrix" && row->entry == std::string("rotary")
                                ? " (the naive rotation matrices are no path of the model, only the tests' "
                                  "reference: tests/unit/test_rotary.cpp)"
                                : ""));
  }
  if (o.peak_tflops < 0) throw Error("--peak-tflops must be positive");
  if (o.profile_steps < 1) throw Error(fmt::format("--profile-steps must be at least 1, got {}", o.profile_steps));
}

// The flags' alternatives as the process's kernel policy (checked by check_bench_options).
model::KernelPolicy bench_kernel_policy(const StepBenchOptions& o) {
  model::KernelPolicy policy;
  for (const auto& [entry, value] : o.kernel_choices) model::find_kernel_alternative(entry)->set(policy, value);
  return policy;
}

// The step for the config under the bench's kernel policy, its data (prepared or synthetic) ready.
std::unique_ptr<BenchedStep> make_bench_step(const StepBenchOptions& o) {
  auto bench = std::make_unique<BenchedStep>();
  config::Config& cfg = bench->cfg;
  cfg = load_run_config(o.config_path, o.overrides);  // validated
  setup_logging(cfg.logging.level);
  if (o.synthetic && cfg.model.vocab_size == 0)
    throw Error("--synthetic needs model.vocab_size (there is no tokenizer to take it from): add "
                "--set model.vocab_size=" + std::to_string(cfg.tokenizer.vocab_size));
  model::set_kernel_policy(bench_kernel_policy(o));  // once, before any model is built
  bench->placement = std::make_unique<Placement>(cfg, dist::DistEnv{});  // a single process
  const bool cuda = bench->device().is_cuda();
  if (o.synthetic) {
    bench->batches = std::make_unique<SyntheticBatches>(cfg, cuda);
  } else {  // prepared as `roformer train` prepares them, into the bench's own directory
    DataSetup setup;
    setup.cfg = &cfg;
    setup.dir = o.run_dir.empty() ? (fs::path(cfg.train.run_dir) / "bench").string() : o.run_dir;
    bench->batches = std::make_unique<TrainingData>(setup, cuda, /*main_rank=*/true);
  }
  StepOptions step_options;
  step_options.sync_timings = o.breakdown;  // on CUDA (the CPU's stages end where they run)
  bench->step = std::make_unique<TrainStep>(cfg, bench->batches->vocab_size(), *bench->placement, step_options);
  return bench;
}

// Warm-up steps, then the measured steps on the clock.
Measurement measure_steps(BenchedStep& bench, const StepBenchOptions& o) {
  const bool cuda = bench.device().is_cuda();
  spdlog::info("bench: {} warm-up + {} measured steps on {} ({}{}, {} data)", o.warmup, o.steps,
               bench.device().str(), config::to_string(bench.cfg.train.precision),
               bench.cfg.train.param_dtype == config::ParamDtype::kBf16 ? " with bf16 parameters" : "",
               o.synthetic ? "synthetic" : "prepared");
  if (!bench.cfg.train.phases.empty())
    spdlog::info("bench: times the first length phase ({} x {} tokens); train.phases' later ones: set "
                 "data.max_seq_len and train.batch_size to theirs", bench.cfg.train.batch_size,
                 bench.cfg.data.max_seq_len);
  // The peak counts the warm-up too: CUDA graphs allocate their memory while they are captured there
  // (a replay allocates nothing), so a peak of the measured steps alone would leave it out.
  if (cuda) {
    core::synchronize(bench.device());
    at::accelerator::resetPeakStats(bench.device().index());  // the device resolved with its index
  }
  // Warm-up steps as the measured ones (no read-back but the last), so CUDA graphs are captured here.
  using Clock = std::chrono::steady_clock;
  const auto warmup_start = Clock::now();
  for (int64_t i = 0; i < o.warmup; ++i) bench.run(/*host_sync=*/i + 1 == o.warmup);
  if (cuda) core::synchronize(bench.device());
  if (o.warmup > 0) {  // the measured steps run in silence: say how long they should take
    const double secs = std::chrono::duration<double>(Clock::now() - warmup_start).count();
    spdlog::info("bench: warm-up done in {:.1f}s; measuring {} step(s), about {:.0f}s at the warm-up's pace", secs,
                 o.steps, secs / static_cast<double>(o.warmup) * static_cast<double>(o.steps));
  }

  Measurement m;
  const auto start = Clock::now();
  for (int64_t i = 0; i < o.steps; ++i) {
    const auto t0 = Clock::now();
    // The last step reads its values back, so a non-finite run is reported and the clock stops
    // after the device is done.
    m.last = bench.run(/*host_sync=*/i + 1 == o.steps);
    m.min_step = std::min(m.min_step, std::chrono::duration<double>(Clock::now() - t0).count());
    m.tokens += m.last.tokens;
    m.n_pred += m.last.n_pred;
    m.stages.data += m.last.timings.data;
    m.stages.forward += m.last.timings.forward;
    m.stages.backward += m.last.timings.backward;
    m.stages.optimizer += m.last.timings.optimizer;
  }
  if (cuda) core::synchronize(bench.device());
  m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!m.last.finite)
    throw Error(fmt::format("bench: non-finite loss ({}) or gradient norm ({})", m.last.loss, m.last.grad_norm));
  return m;
}

// The attention kernel of the measured batches: q/k/v in the autocast dtype, padded only with
// per-document packing of real data (the loader leaves full and synthetic batches unpadded).
std::string attention_kernel_used(BenchedStep& bench, const StepBenchOptions& o) {
  const auto& c = bench.cfg;
  const auto qkv_dtype = c.train.precision == config::Precision::kBf16   ? torch::kBFloat16
                         : c.train.precision == config::Precision::kFp16 ? torch::kHalf
                                                                         : torch::kFloat32;
  std::string attention = bench.step->model()->attention_backend(c.train.batch_size, c.data.max_seq_len, qkv_dtype, false);
  if (!o.synthetic && c.data.packing == "document")
    attention += " (padded batches: " +
                 bench.step->model()->attention_backend(c.train.batch_size, c.data.max_seq_len, qkv_dtype, true) + ")";
  return attention;
}

// What was measured: device, precision, the step's variant and its shape.
json settings_record(BenchedStep& bench, const StepBenchOptions& o) {
  const auto& c = bench.cfg;
  const bool cuda = bench.device().is_cuda();
  json rec = {{"device", bench.device().str()},
          {"precision", config::to_string(c.train.precision)},
          {"param_dtype", config::to_string(c.train.param_dtype)},
          {"fp8", config::to_string(c.train.fp8)},
          {"data", o.synthetic ? "synthetic" : "prepared"},
          // Each fused op that ran: "triton", or "aten (why)" where it fell back (kernels/op_paths.h).
          {"kernel_paths", kernels::op_paths()},
          {"fused_adamw", bench.step->optimizer().fused()},
          {"cuda_graph", bench.step->cuda_graphs() != nullptr},
          {"attention_backend", attention_kernel_used(bench, o)},
          {"num_threads", cuda ? 0 : static_cast<int64_t>(torch::get_num_threads())},
          {"batch_size", c.train.batch_size},
          {"grad_accum", c.train.grad_accum},
          {"seq_len", c.data.max_seq_len},
          {"num_parameters", bench.step->model()->num_parameters()},
          {"warmup", o.warmup},
          {"steps", o.steps}};
  for (const auto& row : model::kernel_alternatives())  // what each alternative made the step compute
    if (*row.record_key) std::visit([&](const auto& v) { rec[row.record_key] = v; }, row.record(model::kernel_policy(), bench.device()));
  return rec;
}

// The record of `--json` (and the figures of the table). Sets *peak_source to where the peak
// TFLOP/s came from (empty when none is known).
json build_record(BenchedStep& bench, const StepBenchOptions& o, const Measurement& m, std::string* peak_source) {
  const auto& c = bench.cfg;
  const bool cuda = bench.device().is_cuda();
  const int64_t sequences = c.train.batch_size * c.train.grad_accum;
  const double mean_pred = static_cast<double>(m.n_pred) / static_cast<double>(o.steps);
  // The dense head runs the decoder at every position: count it at B*T rows.
  const int64_t head_rows = model::kernel_policy().dense_head ? sequences * c.data.max_seq_len
                                                              : static_cast<int64_t>(std::llround(mean_pred));
  const double flops =
      model::mlm_train_flops_per_step(bench.step->model()->options(), sequences, c.data.max_seq_len, head_rows);
  const double step_s = m.seconds / static_cast<double>(o.steps);
  const double tflops = flops / step_s / 1e12;
  const std::string device_name = core::device_name(bench.device());  // the device used, not device 0
  double peak = o.peak_tflops;
  *peak_source = peak > 0 ? "--peak-tflops" : "";
  if (peak <= 0 && cuda) {
    peak = core::known_peak_tflops(device_name, c.train.precision);
    if (peak > 0) *peak_source = "known peak of " + device_name;
  }
  const core::PeakMemory memory = core::peak_memory(bench.device());
  // Per-step times (min, stage breakdown) are exact only when every step ends synchronized.
  const bool per_step_valid = !cuda || o.breakdown;

  json rec = settings_record(bench, o);
  rec.update({{"device_name", device_name},
              {"seconds", m.seconds},
              {"tokens", m.tokens},
              {"tokens_per_s", static_cast<double>(m.tokens) / m.seconds},
              {"ms_per_step_mean", 1000.0 * step_s},
              {"ms_per_step_min", per_step_valid ? json(1000.0 * m.min_step) : json(nullptr)},
              {"n_pred_per_step", mean_pred},
              {"flops_per_step", flops},
              {"achieved_tflops", tflops},
              {"peak_tflops", peak > 0 ? json(peak) : json(nullptr)},
              {"mfu", peak > 0 ? json(model::model_flops_utilization(flops, step_s, peak, 1)) : json(nullptr)},
              {"peak_memory_bytes", memory.bytes},
              {"peak_memory_kind", memory.kind},
              {"final_loss", m.last.loss}});
  const double n = static_cast<double>(o.steps);
  if (per_step_valid)
    rec["breakdown_ms"] = {{"data", 1000.0 * m.stages.data / n},
                           {"forward", 1000.0 * m.stages.forward / n},
                           {"backward", 1000.0 * m.stages.backward / n},
                           {"optimizer", 1000.0 * m.stages.optimizer / n}};
  else
    rec["breakdown_ms"] = nullptr;
  rec["breakdown_synchronized"] = cuda && o.breakdown;
  return rec;
}

// The human-readable report: a header and a markdown table of the record's figures.
void print_table(const json& rec, const StepBenchOptions& o, bool cuda, const std::string& peak_source) {
  const std::string device_name = rec["device_name"].get<std::string>();
  std::cout << fmt::format("roformer bench: {} | {} | {} data | rotary {} | {} head | AdamW {}{}\n",
                           device_name == "cpu" ? fmt::format("cpu ({} threads)", torch::get_num_threads()) : device_name,
                           rec["precision"].get<std::string>() +
                               (rec["param_dtype"] == "bf16"   ? " (bf16 parameters, fp32 masters)"
                                : rec["precision"] == "fp32" ? ""
                                                             : " (autocast)"),
                           rec["data"].get<std::string>(),
                           rec["rotary"].get<std::string>() + (rec["qkv"] == "fused" ? ", fused QKV" : ""),
                           rec["head"].get<std::string>(), rec["fused_adamw"].get<bool>() ? "fused" : "portable",
                           rec["cuda_graph"].get<bool>() ? " | CUDA graphs" : "");
  std::cout << fmt::format("{} x {} sequences x {} tokens per step, {} parameters, {} warm-up + {} measured steps\n\n",
                           rec["grad_accum"].get<int64_t>(), rec["batch_size"].get<int64_t>(), rec["seq_len"].get<int64_t>(),
                           rec["num_parameters"].get<int64_t>(), o.warmup, o.steps);
  std::cout << "| metric | value |\n|---|---:|\n";
  std::cout << fmt::format("| tokens/s | {:.0f} |\n", rec["tokens_per_s"].get<double>());
  std::cout << fmt::format("| ms/step (mean) | {:.2f} |\n", rec["ms_per_step_mean"].get<double>());
  if (!rec["ms_per_step_min"].is_null()) std::cout << fmt::format("| ms/step (min) | {:.2f} |\n", rec["ms_per_step_min"].get<double>());
  if (const json& b = rec["breakdown_ms"]; !b.is_null()) {
    const char* note = cuda ? " (synchronized)" : "";
    std::cout << fmt::format("| data wait ms/step{} | {:.2f} |\n", note, b["data"].get<double>());
    std::cout << fmt::format("| forward + loss ms/step{} | {:.2f} |\n", note, b["forward"].get<double>());
    std::cout << fmt::format("| backward ms/step{} | {:.2f} |\n", note, b["backward"].get<double>());
    std::cout << fmt::format("| optimizer ms/step{} | {:.2f} |\n", note, b["optimizer"].get<double>());
  }
  std::cout << fmt::format("| attention kernel | {} |\n", rec["attention_backend"].get<std::string>());
  std::cout << fmt::format("| model FLOPs/step | {:.4g} |\n", rec["flops_per_step"].get<double>());
  const double tflops = rec["achieved_tflops"].get<double>();
  std::cout << fmt::format("| achieved TFLOP/s | {:.3f} |\n", tflops);
  if (!rec["peak_tflops"].is_null()) {
    const double peak = rec["peak_tflops"].get<double>();
    std::cout << fmt::format("| MFU (peak {:.1f} TFLOP/s, {}) | {:.1f}% |\n", peak, peak_source, 100.0 * tflops / peak);
  }
  std::cout << fmt::format("| peak memory ({}) | {:.1f} MiB |\n", rec["peak_memory_kind"].get<std::string>(),
                           static_cast<double>(rec["peak_memory_bytes"].get<int64_t>()) / 1048576.0);
  std::cout << fmt::format("| final loss | {:.4f} |\n", rec["final_loss"].get<double>());
  if (cuda && !o.breakdown)
    std::cout << "\n(CUDA: steps run without host sync; --breakdown synchronizes between stages to time them, "
                 "at a small cost)\n";
}

}  // namespace

void run_step_benchmark(const StepBenchOptions& o) {
  if (!o.list_variants.empty()) {  // the device script's rows: name|arguments (kernels: seq|name|arguments)
    std::cout << variant_lines(o.list_variants);
    return;
  }
  check_bench_options(o);
  if (!o.profile.empty()) check_profile_path(o.profile);
  const auto bench = make_bench_step(o);
  const Measurement m = measure_steps(*bench, o);
  std::string peak_source;
  const json rec = build_record(*bench, o, m, &peak_source);
  if (!o.profile.empty()) profile_steps(*bench, o.profile_steps, o.profile);
  if (o.json)
    std::cout << rec.dump() << std::endl;
  else
    print_table(rec, o, bench->device().is_cuda(), peak_source);
}

}  // namespace roformer::bench
