// Saving and loading a training run's checkpoints; see checkpointer.h. The directory layout and
// crash safety are store.h's; the file names files.h's.
#include "checkpoint/checkpointer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/file.h"
#include "core/random.h"
#include "core/safetensors.h"
#include "dist/agreement.h"
#include "dist/process_group.h"
#include "checkpoint/files.h"
#include "checkpoint/store.h"

namespace roformer::checkpoint {
namespace fs = std::filesystem;

namespace {

std::string serialize(const std::vector<torch::Tensor>& tensors) {
  std::ostringstream out;
  torch::save(tensors, out);
  return out.str();
}

// Rank 0's part of a save: every file into a temporary directory, sealed, then pruning.
std::string write_checkpoint(const std::string& dir, const TrainerState& state, const CheckpointContents& c,
                             const std::vector<std::string>& rng_states, const core::Faults& faults) {
  CheckpointWriter w(dir, state.step);
  core::save_safetensors(w.path(files::kModel), c.model->hf_named_parameters(),
                         {{"format", "pt"}, {"producer", "roformer"}, {"step", std::to_string(state.step)}});
  torch::save(*c.optimizer, w.path(files::kOptimizer));
  // Fault injection for the crash-safety test: die mid-save, as `kill -9` or a power cut would.
  if (faults.kill_in_save_at_step == state.step) std::raise(SIGKILL);
  // Fault injection for the signal test: a save slow enough to be interrupted.
  if (faults.save_delay_ms > 0) {
    std::fprintf(stderr, "fault injection: the save of step %lld sleeps %lld ms\n", static_cast<long long>(state.step),
                 static_cast<long long>(faults.save_delay_ms));
    std::this_thread::sleep_for(std::chrono::milliseconds(faults.save_delay_ms));
  }
  for (size_t r = 0; r < rng_states.size(); ++r)
    core::write_file_checked(w.path(files::rng(static_cast<int>(r))), rng_states[r]);
  core::write_file_checked(w.path(files::kTrainerState), trainer_state_json(state));
  core::write_file_checked(w.path(files::kConfig), config::to_yaml(*c.config));
  for (const auto& [name, bytes] : c.tokenizer->files()) core::write_file_checked(w.path(name), bytes);
  core::write_file_checked(w.path(files::kMetrics), fs::exists(c.metrics_path) ? core::read_file(c.metrics_path) : "");
  return w.commit();
}

}  // namespace

std::vector<torch::Tensor> get_rng_states() {
  std::vector<torch::Tensor> states;
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    states.push_back(gen.get_state());
  }
  if (torch::cuda::is_available()) {
    for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i) {
      auto gen = at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i)));
      std::lock_guard<std::mutex> lock(gen.mutex());
      states.push_back(gen.get_state());
    }
  }
  return states;
}

void set_rng_states(const std::vector<torch::Tensor>& states) {
  if (states.empty()) return;
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(states[0]);
  }
  if (torch::cuda::is_available()) {
    const auto n = std::min<int64_t>(static_cast<int64_t>(states.size()) - 1, torch::cuda::device_count());
    for (int64_t i = 0; i < n; ++i) {
      auto gen = at::globalContext().defaultGenerator(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(i)));
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(states[static_cast<size_t>(i) + 1]);
    }
  }
}

uint64_t rank_seed(int64_t seed, int rank, int64_t step) {
  return core::mix64(
      (static_cast<uint64_t>(seed) ^ (static_cast<uint64_t>(rank) << 40) ^ static_cast<uint64_t>(step)) +
      core::kGoldenGamma);
}

Checkpointer::Checkpointer(std::string checkpoints_dir, int64_t keep_last, dist::ProcessGroup& group, int rank,
                           int world_size, const core::Faults& faults)
    : dir_(std::move(checkpoints_dir)), keep_last_(keep_last), group_(group), rank_(rank), world_size_(world_size),
      faults_(faults) {}

// Every rank's generator states (dropout), serialized. Collective in a data-parallel run: each
// rank fills its row of a zero (W, longest) byte table and one all-reduce sums the table, so rank 0
// ends with every row; the other ranks get an empty list.
std::vector<std::string> Checkpointer::gather_rng_states() {
  std::string mine = serialize(get_rng_states());
  const int W = world_size_;
  if (W == 1) return {mine};
  const auto lengths = group_.all_gather(static_cast<double>(mine.size()), "checkpoint RNG state sizes");
  const auto longest = static_cast<int64_t>(*std::max_element(lengths.begin(), lengths.end()));
  auto table = torch::zeros({W, longest}, torch::kUInt8);
  std::memcpy(table.data_ptr<uint8_t>() + rank_ * longest, mine.data(), mine.size());
  table = table.to(group_.device());
  group_.all_reduce_sum(table, "checkpoint RNG states");
  if (rank_ != 0) return {};
  table = table.cpu();
  std::vector<std::string> out;
  for (int r = 0; r < W; ++r)
    out.emplace_back(reinterpret_cast<const char*>(table.data_ptr<uint8_t>() + r * longest),
                     static_cast<size_t>(lengths[static_cast<size_t>(r)]));
  return out;
}

// Data parallel: the ranks check that their parameters agree (bit for bit) and send their RNG
// states to rank 0, rank 0 writes the checkpoint, and every rank learns whether it was saved before
// going on (so a failed save stops every rank with the same step on disk).
std::string Checkpointer::save(const TrainerState& state, const CheckpointContents& contents) {
  if (last_saved_step_ == state.step) return "";
  const auto start = std::chrono::steady_clock::now();
  if (world_size_ > 1) {
    const auto agreement = dist::check_parameters_agree(group_, contents.params);
    if (!agreement.agree)
      throw Error(fmt::format("not saving the checkpoint at step {}: {}. Data-parallel ranks must hold identical "
                              "parameters; resume from the last checkpoint ({})",
                              state.step, agreement.message(), dir_));
  }
  const auto rng_states = gather_rng_states();
  std::exception_ptr failure;
  std::string final_dir;
  if (rank_ == 0) {
    try {
      try {
        final_dir = write_checkpoint(dir_, state, contents, rng_states, faults_);
        prune_checkpoints(dir_, keep_last_, final_dir);
      } catch (const c10::Error& e) {
        throw Error(fmt::format("saving the checkpoint at step {} failed: {} (the previous checkpoint is intact)",
                                state.step, e.what_without_backtrace()));
      }
    } catch (...) {
      failure = std::current_exception();
    }
  }
  if (world_size_ > 1) {  // doubles as the barrier: no rank runs ahead of a checkpoint being written
    const auto saved = group_.all_gather(failure ? 0.0 : 1.0, "checkpoint save");
    if (rank_ != 0 && saved[0] == 0.0)
      throw Error(fmt::format("rank 0 could not save the checkpoint at step {} (its log says why); the previous "
                              "checkpoint is intact", state.step));
  }
  if (failure) std::rethrow_exception(failure);
  last_saved_step_ = state.step;
  spdlog::info("saved checkpoint {} ({}, {:.1f}s)", final_dir, state.reason,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return final_dir;
}

// Every rank reads the same checkpoint (a shared filesystem in multi-node runs).
void Checkpointer::load(const CheckpointMeta& meta, const CheckpointContents& contents, const torch::Device& device,
                        int64_t seed) {
  const std::string& dir = meta.dir;
  try {
    auto model = contents.model;  // the same module (a shared handle), not const
    model->load_hf_state_dict(core::load_safetensors((fs::path(dir) / files::kModel).string()));
    // Onto the run's device: train.device may change on resume (a CPU checkpoint resumed on CUDA or
    // the reverse), and the portable AdamW needs its moments where the parameters are.
    torch::load(*contents.optimizer, (fs::path(dir) / files::kOptimizer).string(), device);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("cannot load checkpoint {}: {}", dir, e.what_without_backtrace()));
  }
  restore_rng_states(dir, meta.state.world_size, meta.state.step, seed);
  last_saved_step_ = meta.state.step;
}

// Same world size: every rank continues its own generators exactly. Another world size: rank 0
// continues the saved rank-0 generators, and other ranks start fresh dropout streams seeded from
// (seed, rank, step).
void Checkpointer::restore_rng_states(const std::string& dir, int64_t saved_world_size, int64_t step, int64_t seed) {
  if (saved_world_size != world_size_ && rank_ > 0) {
    torch::manual_seed(rank_seed(seed, rank_, step));
    return;
  }
  const std::string path = (fs::path(dir) / files::rng(rank_)).string();
  std::vector<torch::Tensor> rng;
  try {
    torch::load(rng, path);
  } catch (const c10::Error& e) {
    throw Error(fmt::format("cannot load checkpoint {}: {}: {}", dir, path, e.what_without_backtrace()));
  }
  set_rng_states(rng);
}

}  // namespace roformer::checkpoint
