// The Trainer built whole from its Plan: device, process group, run directory, data, model, AdamW
// and, for a run, the starting point (--init-from weights or a checkpoint); then saving and
// resuming. What a checkpoint holds and how it is written and read is the checkpoint layer's
// (checkpoint/); each component saves and restores its own part of trainer_state.json. The LR
// schedule is a pure function of the global step, so its state is the step. The step itself is in
// train_step.cpp, the run's loop in train_loop.cpp.
#include "train/trainer.h"

#include <chrono>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "checkpoint/checkpointer.h"
#include "checkpoint/run_dir.h"
#include "checkpoint/run_layout.h"
#include "core/device.h"
#include "core/error.h"
#include "core/file.h"
#include "core/hash.h"
#include "core/logging.h"
#include "dist/agreement.h"
#include "dist/gradient_reducer.h"
#include "dist/process_group.h"
#include "train/memory_check.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/signals.h"
#include "train/training_data.h"

namespace roformer::train {
namespace fs = std::filesystem;

void LoopState::save(checkpoint::TrainerState& state) const {
  state.step = step;
  state.tokens_seen = tokens_seen;
  if (last_eval)
    state.last_eval = checkpoint::TrainerState::Eval{last_eval->loss, last_eval->accuracy, last_eval->top5_accuracy,
                                                     last_eval->perplexity};
}

void LoopState::restore(const checkpoint::TrainerState& state) {
  step = state.step;
  tokens_seen = state.tokens_seen;
}

Trainer::Trainer(Plan plan)
    : plan_(std::move(plan)), scaler_(plan_.cfg.train.precision == config::Precision::kFp16) {
  setup_device();  // first: a device that does not exist leaves no run directory behind
  if (plan_.writes_run) setup_run_dir();
  check_ranks_start_alike();
  setup_data();
  setup_model_and_optimizer();
  if (plan_.writes_run) setup_starting_point();
}

Trainer::~Trainer() = default;

bool Trainer::uses_fused_adamw() const { return optimizer_->fused(); }

int64_t Trainer::adamw_step_count() { return optimizer_->step_count(); }

// Resolves train.device once (CUDA always with its index) and makes it the process's current
// device before anything allocates on it: pinned host memory, streams and synchronize follow it.
// Then the process group (a world of one unless a launcher started this process).
void Trainer::setup_device() {
  const config::Config& cfg = plan_.cfg;
  const dist::DistEnv& env = plan_.env;
  device_ = core::resolve_device(cfg.train.device, "train.device");
  config::resolve_param_dtype(plan_.cfg, device_.is_cuda());  // before config.yaml is written
  if (env.distributed() && device_.is_cuda()) {  // each rank drives the GPU of its LOCAL_RANK
    const auto visible = static_cast<int>(torch::cuda::device_count());
    if (env.local_rank >= visible)
      throw Error(fmt::format("LOCAL_RANK is {} but this node has {} visible CUDA device(s): start at most {} "
                              "process(es) per node (torchrun --nproc-per-node)", env.local_rank, visible, visible));
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
  }
  core::use_device(device_);
  dist::ProcessGroupOptions o;
  o.backend = cfg.distributed.backend;
  o.timeout = std::chrono::seconds(cfg.distributed.timeout_s);
  group_ = std::make_unique<dist::ProcessGroup>(env, device_, o);  // world of one: no store, identity collectives
  if (env.distributed())
    spdlog::info("data-parallel run: {} processes (launched by {}), {} backend, rendezvous {}:{}; this is rank 0 on {}",
                 env.world_size, env.launcher, group_->backend(), env.master_addr, env.master_port, device_.str());
  if (cfg.train.precision == config::Precision::kFp16 && !device_.is_cuda())
    throw Error("train.precision fp16 needs CUDA; use fp32 or bf16 on the CPU");
  if (cfg.train.num_threads > 0) torch::set_num_threads(static_cast<int>(cfg.train.num_threads));
  // Before the data and the model are built; the vocabulary is the configured one until the tokenizer is loaded.
  check_memory(cfg.model.vocab_size > 0 ? cfg.model.vocab_size : cfg.tokenizer.vocab_size);
}

void Trainer::check_memory(int64_t vocab_size) const {
  check_training_memory(plan_.cfg, vocab_size, core::device_memory_bytes(device_), device_.str());
}

// The run directory: the checkpointer of RUN/checkpoints, and (rank 0) train.log and config.yaml.
void Trainer::setup_run_dir() {
  const std::string& run_dir = plan_.run_dir;
  const checkpoint::RunLayout layout(run_dir);
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) throw Error(fmt::format("cannot create run directory '{}': {}", run_dir, ec.message()));
  checkpointer_ = std::make_unique<checkpoint::Checkpointer>(layout.checkpoints(), plan_.cfg.checkpoint.keep_last,
                                                             *group_, plan_.env.rank, world_size(), plan_.faults);
  if (main_rank()) {  // rank 0 owns train.log and config.yaml
    checkpoint::check_checkpoints_writable(checkpointer_->dir());
    add_log_file(layout.train_log());
    core::write_file_atomic(layout.config(), "# Resolved config of this run (from " + plan_.config_origin + ")\n" +
                                                 config::to_yaml(plan_.cfg));
  }
  spdlog::info("run directory {} | device {} | precision {}", run_dir, device_.str(),
               config::to_string(plan_.cfg.train.precision));
}

// Data parallel: every rank must run the same command. The ranks compare a hash of their resolved
// config and checkpoint choice (an all-gather) before anything depends on them, so a rank started
// with other overrides, or one that sees another checkpoint (a run directory that is not shared),
// stops the run with a message naming it instead of training something else.
void Trainer::check_ranks_start_alike() {
  const std::string resume_dir = plan_.resume ? plan_.resume->dir : std::string();
  const std::string resolved = config::to_yaml(plan_.cfg) + "\nresume: " + resume_dir +
                               "\ninit-from: " + (plan_.init ? plan_.init->dir : std::string());
  core::Hasher h;
  h.update(resolved.data(), resolved.size());
  const auto differ = dist::ranks_differing_from_rank0(*group_, h.digest(), "start-up check of the ranks' configs");
  if (!differ.empty())
    throw Error(fmt::format("rank(s) {} resolved another config or checkpoint than rank 0 (this rank resumes from "
                            "'{}'): every rank must run the same command (config, --set, --resume) on a run "
                            "directory all of them see",
                            dist::format_ranks(differ), resume_dir.empty() ? "nothing" : resume_dir));
}

// Rank 0 trains the tokenizer and prepares the data into the run directory; the other ranks then
// find them there.
void Trainer::setup_data() {
  const char* waiting = "waiting for rank 0 to prepare the tokenizer and data";
  if (!main_rank()) group_->barrier(waiting);
  data_ = std::make_unique<TrainingData>(plan_, device_.is_cuda(), main_rank());
  if (main_rank()) group_->barrier(waiting);
}

void Trainer::setup_model_and_optimizer() {
  const config::Config& cfg = plan_.cfg;
  const int64_t vocab = data_->vocab_size();
  if (cfg.model.vocab_size != 0 && cfg.model.vocab_size != vocab)
    throw Error(fmt::format("model.vocab_size is {} but the tokenizer has {} pieces; set model.vocab_size: 0 to "
                            "take it from the tokenizer", cfg.model.vocab_size, vocab));
  check_memory(vocab);
  torch::manual_seed(static_cast<uint64_t>(cfg.train.seed));
  // The CUDA fast paths (model/options.h: rotary "fused", fused_qkv); the CPU keeps the reference
  // element-wise rotation, bit-identical to the golden values.
  model::Kernels kernels = plan_.variant.kernels;
  if (plan_.variant.auto_rotary)
    kernels.rotary = device_.is_cuda() ? model::RotaryImpl::kFused : model::RotaryImpl::kElementwise;
  model_ = model::RoFormerForMaskedLM(model::RoFormerOptions(cfg.model, vocab).kernels(kernels));
  model_->to(device_);
  model_->train();
  spdlog::info("model: {} parameters ({} layers, hidden {}, {} heads, embedding {}, {}-LN, {} attention)",
               model_->num_parameters(), cfg.model.num_layers, cfg.model.hidden_size, cfg.model.num_heads,
               config::effective_embedding_size(cfg.model), config::to_string(cfg.model.norm),
               config::to_string(cfg.model.attention));

  // bf16 parameters: the step runs a bf16 copy and AdamW keeps model_ as the fp32 master weights.
  compute_ = cfg.train.param_dtype == config::ParamDtype::kBf16 ? make_bf16_compute_model(model_) : model_;
  optimizer_ = std::make_unique<AdamW>(model_, compute_, cfg.optimizer);
  // The reducer sums the gradients of the optimizer's parameters. With master weights they are the fp32 masters, which
  // no backward reaches: finish() then all-reduces the accumulated fp32 gradients after the last
  // micro-batch (no overlap with backward, but the sum over ranks in fp32).
  dist::GradientReducerOptions ro;
  ro.bucket_mb = cfg.distributed.bucket_mb;
  reducer_ = dist::make_gradient_reducer(*group_, optimizer_->params(), ro);  // none for a world of one
  schedule_ = std::make_unique<LrSchedule>(cfg.schedule, cfg.optimizer.lr, cfg.train.steps);
  const auto sum_options = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
  sums_ = {torch::zeros({}, sum_options), torch::zeros({}, sum_options)};  // at fixed addresses: graphs write them
  setup_cuda_graphs();
}

// CUDA graphs (train/step_graphs.h) where the step is static and sync-free: CUDA, one process (the
// gradient reducer's hooks and collectives stay eager), the fused AdamW (its learning rate and step
// counts live on the device), no dynamic loss scale (fp16 reads its overflow flag back), no
// gradient checkpointing (it saves and restores the generator's state, which a capture may not read),
// no per-phase timings (bench --breakdown: a graph runs forward and backward as one).
void Trainer::setup_cuda_graphs() {
  graphs_.reset();
  if (!plan_.cfg.train.cuda_graph || !device_.is_cuda()) return;
  std::string why_not;
  if (!StepGraphs::supported()) why_not = "this build has a CPU-only LibTorch";
  else if (world_size() > 1) why_not = "data parallel runs keep the step eager";
  else if (!optimizer_->fused()) why_not = "optimizer.fused is false";
  else if (scaler_.dynamic()) why_not = "fp16 reads its loss scale back";
  else if (plan_.cfg.model.gradient_checkpointing) why_not = "model.gradient_checkpointing is on";
  else if (plan_.sync_timings) why_not = "per-phase timings synchronize between the phases";
  if (!why_not.empty()) {
    spdlog::info("CUDA graphs: off ({}); the step runs eagerly", why_not);
    return;
  }
  graphs_ = std::make_unique<StepGraphs>();
  spdlog::info("CUDA graphs: on (each micro-batch shape and the update between logging steps; train.cuda_graph: "
               "false turns them off)");
}

// What a run starts from: the --init-from weights or the checkpoint (then every rank holds the same
// weights), its metrics so far and the TensorBoard writer.
void Trainer::setup_starting_point() {
  if (plan_.init) load_init_weights(*plan_.init, *model_);
  dist::broadcast_parameters(*group_, optimizer_->params());  // start identical, whatever each rank's init did
  optimizer_->loaded();  // bf16 parameters: the compute model takes the weights
  if (!main_rank()) torch::manual_seed(checkpoint::rank_seed(plan_.cfg.train.seed, plan_.env.rank, 0));  // own dropout stream
  const checkpoint::RunLayout layout(plan_.run_dir);
  if (main_rank()) metrics_ = MetricsWriter(layout.metrics());
  if (plan_.resume)
    resume();
  else if (main_rank() && fs::exists(metrics_.path()) && fs::file_size(metrics_.path()) > 0)
    spdlog::warn("{} already holds records from an earlier run; new records are appended", metrics_.path());
  if (main_rank() && plan_.cfg.logging.tensorboard)  // after the checkpoint: a resumed session starts past its step
    tensorboard_.emplace(plan_.cfg, layout, plan_.resume ? std::optional<int64_t>(loop_.step) : std::nullopt);
}

checkpoint::CheckpointContents Trainer::checkpoint_contents() {
  return {model_, &optimizer_->torch_optimizer(), &plan_.cfg, data_->tokenizer(), metrics_.path(), optimizer_->params()};
}

// Collective in a data-parallel run (Checkpointer::save): each component writes its part of the state.
void Trainer::save_checkpoint(const std::string& reason) {
  const SaveInProgress saving;  // a second stop signal now waits for the save
  optimizer_->sync_step_counts();
  checkpoint::TrainerState state;
  loop_.save(state);
  data_->save(state);
  scaler_.save(state);
  state.world_size = world_size();
  state.global_batch_size = global_batch();
  state.num_parameters = model_->num_parameters();
  state.reason = reason;
  state.roformer_version = ROFORMER_VERSION;
  checkpointer_->save(state, checkpoint_contents());
}

// Every rank reads the same checkpoint; each component takes its part of the trainer state back.
void Trainer::resume() {
  const checkpoint::CheckpointMeta& from = *plan_.resume;
  const checkpoint::TrainerState& state = from.state;
  checkpointer_->load(from, checkpoint_contents(), device_, plan_.cfg.train.seed);
  loop_.restore(state);
  data_->restore(state);
  scaler_.restore(state);
  optimizer_->loaded();
  if (state.world_size != world_size())
    spdlog::info("resuming a checkpoint written by {} process(es) with {}: model, optimizer, step, learning-rate "
                 "schedule and the global data position carry over{}",
                 state.world_size, world_size(), world_size() > 1 ? "; ranks other than 0 start new dropout streams" : "");
  const int64_t saved_global_batch = state.global_batch_size.value_or(global_batch());
  if (saved_global_batch != global_batch() && main_rank())
    spdlog::warn("the global batch is now {} sequences per step (train.batch_size {} x train.grad_accum {} x {} "
                 "process(es)); the checkpoint was trained with {}. Keep batch_size x grad_accum x processes equal "
                 "to continue with the same batch", global_batch(), plan_.cfg.train.batch_size,
                 plan_.cfg.train.grad_accum, world_size(), saved_global_batch);
  spdlog::info("resumed from {} at step {} ({} tokens seen)", from.dir, loop_.step, loop_.tokens_seen);
  if (main_rank()) metrics_.resume_from(from.dir);  // the records up to the checkpoint's step
  // The same path may still hold other bytes on another node.
  const auto agreement = dist::check_parameters_agree(*group_, optimizer_->params());
  if (!agreement.agree)
    throw Error(fmt::format("after loading {}: {}. The ranks read different checkpoints: the run directory must "
                            "be on a filesystem every rank sees", from.dir, agreement.message()));
}

}  // namespace roformer::train
