// The training run: wires the tokenizer, prepared data, the dynamic-masking loader, the RoFormer
// model, AdamW (train/optimizer.h), the LR schedule, loss scaling, progress and metrics, periodic
// evaluation and crash-safe checkpoints with exact resume. What a checkpoint holds and how it is
// written and read is the checkpoint layer's (checkpoint/files.h, checkpoint/checkpointer.h); the
// trainer says what to save and when. The LR schedule is a pure function of the global step, so
// its state is the step.
#include "train/trainer.h"


#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/config.h"
#include "core/device.h"
#include "core/error.h"
#include "core/file.h"
#include "core/hash.h"
#include "core/logging.h"
#include "data/corpus.h"
#include "data/loader.h"
#include "data/prepared_cache.h"
#include "data/tokenizer.h"
#include "dist/agreement.h"
#include "dist/collectives.h"
#include "dist/env.h"
#include "dist/gradient_reducer.h"
#include "dist/process_group.h"
#include "model/flops.h"
#include "model/roformer.h"
#include "train/bench.h"
#include "train/cadence.h"
#include "checkpoint/files.h"
#include "checkpoint/store.h"
#include "train/evaluate.h"
#include "train/memory_check.h"
#include "train/metrics.h"
#include "train/metrics_window.h"

#include "train/progress.h"
#include "checkpoint/resume_policy.h"
#include "checkpoint/run_dir.h"
#include "train/schedule.h"
#include "train/signals.h"
#include "checkpoint/trainer_state.h"

namespace roformer::train {
namespace files = checkpoint::files;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What to do after a non-finite step: resume from the newest intact checkpoint saved at step <=
// max_step (the state the failing step started from replays the same failure), or start over.
std::string nonfinite_resume_advice(const std::string& ckpt_dir, const std::string& run_dir, int64_t max_step) {
  const std::string fixes = "lowering optimizer.lr, raising schedule.warmup_steps or setting optimizer.grad_clip";
  const std::string usable = checkpoint::find_latest_valid_checkpoint(ckpt_dir, nullptr, max_step);
  if (usable.empty())
    return fmt::format("No checkpoint from before the failure exists to resume from (the newest state would fail "
                       "the same way), so nothing was saved: start a new run in another --run-dir after {}", fixes);
  return fmt::format("Nothing was saved (that state would fail the same way). Resume from {}, the newest checkpoint "
                     "from before the failure, after {}: roformer train --run-dir {} --resume {}",
                     usable, fixes, run_dir, usable);
}

}  // namespace

Trainer::Trainer(config::Config config, std::string run_dir, std::string resume_dir, std::string config_origin)
    : cfg_(std::move(config)), run_dir_(std::move(run_dir)), resume_dir_(std::move(resume_dir)),
      config_origin_(std::move(config_origin)), scaler_(cfg_.train.precision == config::Precision::kFp16) {}

Trainer::~Trainer() = default;

// What the first save needs, checked before the first step rather than found after hours of training:
// an existing checkpoints/ is a folder that takes a file (a missing one is made in the run directory,
// which takes config.yaml, at the first save).
void Trainer::check_checkpoints_writable() const {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(ckpt_dir_, ec))) return;
  std::string why = fs::is_directory(ckpt_dir_, ec) ? "" : "it is not a directory";
  if (why.empty()) {
    const std::string probe = (fs::path(ckpt_dir_) / fmt::format(".write-check-{}", ::getpid())).string();
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ::write(fd, "x", 1) != 1) why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    ::unlink(probe.c_str());
  }
  if (!why.empty())
    throw Error(fmt::format("cannot write checkpoints into '{}': {}; make it a writable directory (or choose another "
                            "--run-dir) before training, not at the first save", ckpt_dir_, why));
}

void Trainer::setup_run_dir() {
  std::error_code ec;
  fs::create_directories(run_dir_, ec);
  if (ec) throw Error(fmt::format("cannot create run directory '{}': {}", run_dir_, ec.message()));
  ckpt_dir_ = (fs::path(run_dir_) / "checkpoints").string();
  if (!main_rank()) return;  // rank 0 owns train.log and config.yaml
  check_checkpoints_writable();
  add_log_file((fs::path(run_dir_) / "train.log").string());
  core::write_file_atomic((fs::path(run_dir_) / "config.yaml").string(),
                    "# Resolved config of this run (from " + config_origin_ + ")\n" + config::to_yaml(cfg_));
}

void Trainer::setup_tokenizer() {
  std::string path = init_ ? adopt_init_tokenizer(*init_, cfg_, run_dir_) : cfg_.tokenizer.model;
  if (!resume_dir_.empty()) {
    // The checkpoint carries its tokenizer: the run continues with exactly that one.
    const std::string state_path = (fs::path(resume_dir_) / files::kTrainerState).string();
    const checkpoint::TrainerState state = checkpoint::parse_trainer_state(core::read_file(state_path), state_path);
    path = (fs::path(run_dir_) / "tokenizer" / "tokenizer.model").string();
    if (!fs::exists(path) || core::file_checksum(path) != core::file_checksum((fs::path(resume_dir_) / files::kTokenizer).string())) {
      fs::create_directories(fs::path(path).parent_path());
      fs::copy_file((fs::path(resume_dir_) / files::kTokenizer), path, fs::copy_options::overwrite_existing);
    }
    tokenizer_ = data::Tokenizer::load(path);
    if (tokenizer_->fingerprint() != state.tokenizer_fingerprint)
      throw Error(fmt::format("the tokenizer in checkpoint {} does not match its recorded fingerprint; the "
                              "checkpoint is damaged", resume_dir_));
    return;
  }
  if (path.empty()) {
    // The run's own tokenizer, trained from the config's tokenizer.* settings: one left by an
    // earlier run in this directory (failed, or replaced with --overwrite) is reused only when it
    // was trained with the very same settings (its training.json), else trained again.
    const fs::path tok_dir = fs::path(run_dir_) / "tokenizer";
    path = (tok_dir / "tokenizer.model").string();
    auto tok_options = data::tokenizer_options_from_config(cfg_, tok_dir.string());
    tok_options.force = true;
    bool reuse = false;
    if (fs::exists(path)) {
      std::string recorded;
      try {
        recorded = core::read_file((tok_dir / data::kTokenizerSettingsFile).string(), "tokenizer settings");
      } catch (const Error&) {
      }
      reuse = recorded == data::training_settings(tok_options) || !main_rank();  // rank 0 trained it just now
      if (!reuse)
        spdlog::info("the tokenizer left in {} was trained with other tokenizer.* settings (or its record is missing): "
                     "training it again from the config's", tok_dir.string());
    }
    if (!reuse) {
      auto inputs = cfg_.tokenizer.input.empty() ? cfg_.data.train_files : cfg_.tokenizer.input;
      if (std::any_of(inputs.begin(), inputs.end(), [](const std::string& f) { return data::is_prepared_dir(f); }))
        throw Error("data.train_files lists prepared directories, so the tokenizer cannot be trained from them: set "
                    "tokenizer.model to the tokenizer it was prepared with (or tokenizer.input to text files)");
      if (inputs.empty())
        throw Error("no training text: set data.train_files (plain text or JSONL files), e.g. "
                    "--set data.train_files=[../shared/data/brown/train.txt]");
      spdlog::info("training a {} tokenizer ({} pieces) on {} file(s)", cfg_.tokenizer.model_type,
                   cfg_.tokenizer.vocab_size, inputs.size());
      try {
        path = data::train_tokenizer(tok_options);
      } catch (const Error& e) {  // about an input file: name the key that listed it
        if (std::string(e.what()).find("tokenizer.") != std::string::npos) throw;
        throw Error(fmt::format("{}: {}", cfg_.tokenizer.input.empty() ? "data.train_files" : "tokenizer.input", e.what()));
      }
    }
  }
  tokenizer_ = data::Tokenizer::load(path);
  spdlog::info("tokenizer {} ({} pieces, fingerprint {})", path, tokenizer_->vocab_size(), tokenizer_->fingerprint());
}

std::shared_ptr<const data::PreparedCorpus> Trainer::prepare(const std::vector<std::string>& files,
                                                               const std::string& name) {
  data::PreparedDataRequest request;
  request.files = files;
  request.name = name;
  request.cache_dir = cfg_.data.prepared_dir.empty() ? (fs::path(run_dir_) / "data").string() : cfg_.data.prepared_dir;
  request.text_field = cfg_.data.text_field;
  request.resuming = !resume_dir_.empty();
  return data::open_prepared_data(request, *tokenizer_);
}

void Trainer::setup_model_and_optimizer() {
  const int64_t vocab = tokenizer_ ? tokenizer_->vocab_size() : cfg_.model.vocab_size;  // synthetic: the config's
  if (cfg_.model.vocab_size != 0 && cfg_.model.vocab_size != vocab)
    throw Error(fmt::format("model.vocab_size is {} but the tokenizer has {} pieces; set model.vocab_size: 0 to "
                            "take it from the tokenizer", cfg_.model.vocab_size, vocab));
  check_memory(vocab);
  torch::manual_seed(static_cast<uint64_t>(cfg_.train.seed));
  // The CUDA fast paths (model/options.h: rotary "fused", fused_qkv); the CPU keeps the reference
  // element-wise rotation, bit-identical to the golden values.
  model::Kernels kernels = variant_.kernels;
  if (variant_.auto_rotary) kernels.rotary = device_.is_cuda() ? model::RotaryImpl::kFused : model::RotaryImpl::kElementwise;
  model_ = model::RoFormerForMaskedLM(model::RoFormerOptions(cfg_.model, vocab).kernels(kernels));
  model_->to(device_);
  model_->train();
  spdlog::info("model: {} parameters ({} layers, hidden {}, {} heads, embedding {}, {}-LN, {} attention)",
               model_->num_parameters(), cfg_.model.num_layers, cfg_.model.hidden_size, cfg_.model.num_heads,
               config::effective_embedding_size(cfg_.model), config::to_string(cfg_.model.norm),
               config::to_string(cfg_.model.attention));

  // bf16 parameters: the step runs a bf16 copy and AdamW keeps model_ as the fp32 master weights.
  compute_ = cfg_.train.param_dtype == config::ParamDtype::kBf16 ? make_bf16_compute_model(model_) : model_;
  optimizer_ = std::make_unique<AdamW>(model_, compute_, cfg_.optimizer);
  // The reducer sums the gradients of the optimizer's parameters. With master weights they are the fp32 masters, which
  // no backward reaches: finish() then all-reduces the accumulated fp32 gradients after the last
  // micro-batch (no overlap with backward, but the sum over ranks in fp32).
  dist::GradientReducerOptions ro;
  ro.bucket_mb = cfg_.distributed.bucket_mb;
  reducer_ = dist::make_gradient_reducer(*group_, optimizer_->params(), ro);  // none for a world of one
  schedule_ = std::make_unique<LrSchedule>(cfg_.schedule, cfg_.optimizer.lr, cfg_.train.steps);
  if (const char* at_step = std::getenv("ROFORMER_FAULT_NONFINITE_GRAD_AT_STEP")) fault_nonfinite_step_ = std::atoll(at_step);
  if (const char* at_step = std::getenv("ROFORMER_FAULT_OOM_AT_STEP")) fault_oom_step_ = std::atoll(at_step);
  setup_cuda_graphs();
}

// CUDA graphs (train/step_graphs.h) where the step is static and sync-free: CUDA, one process (the
// gradient reducer's hooks and collectives stay eager), the fused AdamW (its learning rate and step
// counts live on the device), no dynamic loss scale (fp16 reads its overflow flag back), no
// gradient checkpointing (it saves and restores the generator's state, which a capture may not read),
// no per-phase timings (bench --breakdown: a graph runs forward and backward as one).
void Trainer::setup_cuda_graphs() {
  graphs_.reset();
  if (!cfg_.train.cuda_graph || !device_.is_cuda()) return;
  std::string why_not;
  if (!StepGraphs::supported()) why_not = "this build has a CPU-only LibTorch";
  else if (world_size() > 1) why_not = "data parallel runs keep the step eager";
  else if (!optimizer_->fused()) why_not = "optimizer.fused is false";
  else if (scaler_.dynamic()) why_not = "fp16 reads its loss scale back";
  else if (cfg_.model.gradient_checkpointing) why_not = "model.gradient_checkpointing is on";
  else if (sync_timings_) why_not = "per-phase timings synchronize between the phases";
  if (!why_not.empty()) {
    spdlog::info("CUDA graphs: off ({}); the step runs eagerly", why_not);
    return;
  }
  graphs_ = std::make_unique<StepGraphs>();
  spdlog::info("CUDA graphs: on (each micro-batch shape and the update between logging steps; train.cuda_graph: "
               "false turns them off)");
}

int64_t Trainer::adamw_step_count() { return optimizer_->step_count(); }

// Collective in a data-parallel run (Checkpointer::save).
void Trainer::save_checkpoint(const std::string& reason) {
  const SaveInProgress saving;  // a second stop signal now waits for the save
  optimizer_->sync_step_counts();
  checkpoint::TrainerState state;
  state.step = step_;
  state.tokens_seen = tokens_seen_;
  const auto loader_state = loader_->state();
  state.loader_epoch = loader_state.epoch;
  state.loader_position = loader_state.position;
  state.world_size = world_size();
  state.global_batch_size = global_batch();
  state.loss_scale = scaler_.state_scale();
  state.good_steps = scaler_.good_steps();
  state.tokenizer_fingerprint = tokenizer_->fingerprint();
  state.num_parameters = model_->num_parameters();
  state.reason = reason;
  state.roformer_version = ROFORMER_VERSION;
  if (last_eval_)
    state.last_eval = checkpoint::TrainerState::Eval{last_eval_->loss, last_eval_->accuracy, last_eval_->top5_accuracy,
                                         last_eval_->perplexity};
  checkpointer_->save(state, checkpoint_contents());
}

checkpoint::CheckpointContents Trainer::checkpoint_contents() {
  return {model_, &optimizer_->torch_optimizer(), &cfg_, &*tokenizer_, metrics_.path(), optimizer_->params()};
}

// Every rank reads the same checkpoint; the loop's own state comes back from its trainer_state.json.
void Trainer::load_checkpoint(const std::string& dir) {
  const checkpoint::TrainerState state = checkpointer_->load(dir, checkpoint_contents(), device_, cfg_.train.seed);
  step_ = state.step;
  const int64_t global_batch = this->global_batch();
  const int64_t saved_global_batch = state.global_batch_size.value_or(global_batch);
  if (state.world_size != world_size())
    spdlog::info("resuming a checkpoint written by {} process(es) with {}: model, optimizer, step, learning-rate "
                 "schedule and the global data position carry over{}",
                 state.world_size, world_size(), world_size() > 1 ? "; ranks other than 0 start new dropout streams" : "");
  if (saved_global_batch != global_batch && main_rank())
    spdlog::warn("the global batch is now {} sequences per step (train.batch_size {} x train.grad_accum {} x {} "
                 "process(es)); the checkpoint was trained with {}. Keep batch_size x grad_accum x processes equal "
                 "to continue with the same batch", global_batch, cfg_.train.batch_size, cfg_.train.grad_accum,
                 world_size(), saved_global_batch);
  tokens_seen_ = state.tokens_seen;
  scaler_.restore(state.loss_scale, state.good_steps);
  data::LoaderState ls;
  ls.epoch = state.loader_epoch;
  ls.position = state.loader_position;
  loader_->restore(ls);
  spdlog::info("resumed from {} at step {} ({} tokens seen)", dir, step_, tokens_seen_);
}

void PhaseClock::end(double& seconds) {
  if (synchronize_) core::synchronize(device_);
  const auto now = std::chrono::steady_clock::now();
  seconds += std::chrono::duration<double>(now - last_).count();
  last_ = now;
}

data::Batch Trainer::next_batch() { return synthetic_ ? synthetic_->next() : loader_->next(); }

namespace {

// The global gradient norm (after unscaling for fp16); clipping follows in the update.
torch::Tensor gradient_norm(const std::vector<torch::Tensor>& grads, const torch::Device& device) {
  if (grads.empty()) return torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  return torch::stack(torch::_foreach_norm(grads)).to(torch::kFloat32).norm();
}

}  // namespace

// One optimizer step over grad_accum micro-batches.
//
// Host synchronization: a synced step reads the gradient norm, loss and accuracy back (one sync),
// clips on the host and stops on a non-finite value before the update (the CPU path, fp16, the
// portable optimizer, and logging/eval/checkpoint steps on CUDA). An unsynced step (CUDA, bf16 or
// fp32, fused AdamW) reads nothing back: the clip coefficient min(1, clip / (norm + 1e-6)) is
// applied on the device, and a non-finite norm sets the sticky device flag nonfinite_, which the
// fused kernel takes as found_inf, so from that step on no update is applied; the next synced step
// sees the flag and reports it.
StepResult Trainer::train_step(bool host_sync) {
  // Tests only: the allocator's out-of-memory error, as a too-large batch raises it on a device.
  TORCH_CHECK_WITH(OutOfMemoryError, fault_oom_step_ != step_ + 1,
                   "CUDA out of memory. Tried to allocate 2.00 GiB (ROFORMER_FAULT_OOM_AT_STEP)");
  StepResult r;
  PhaseClock clock(device_, sync_timings_);
  // A long step (many micro-batches) is given up when a stop signal arrives during it, so a run asked
  // to stop stops within a micro-batch: the data position and the random generators are rewound to
  // the step's start, so the resumed run repeats it exactly. Distributed, the ranks decide together
  // at the step's start instead.
  const bool abandonable = world_size() == 1 && cfg_.train.grad_accum > 1 && loader_ && !synthetic_;
  std::optional<data::LoaderState> loader_start;
  std::vector<torch::Tensor> rng_start;
  if (abandonable) {
    loader_start = loader_->state();
    rng_start = checkpoint::get_rng_states();
  }
  const std::vector<data::Batch> micro = step_batches(r);
  clock.end(r.timings.data);
  r.synced = host_sync || r.stop || (!device_.is_cuda() && !sync_free_on_cpu_) || scaler_.dynamic() ||
             !optimizer_->fused();
  const StepSums sums = forward_backward(micro, r, clock, abandonable);
  if (r.abandoned) {
    optimizer_->zero_grad();
    loader_->restore(*loader_start);
    checkpoint::set_rng_states(rng_start);
    return r;
  }
  // Graphs need the gradients at fixed addresses from the first backward on.
  if (graphs_ && !optimizer_->keeps_gradients()) optimizer_->keep_gradients();
  if (r.synced) {
    auto grads = unscaled_gradients();
    update_synced(grads, gradient_norm(grads, device_), sums, r);
  } else {
    optimizer_->set_lr(schedule_->lr(step_));  // outside the graph: a device tensor the update reads
    if (graphs_ && fault_nonfinite_step_ != step_ + 1)
      graphs_->update([this] { update_unsynced(); });
    else
      update_unsynced();
  }
  clock.end(r.timings.optimizer);
  return r;
}

// The step's micro-batches, their token counts and the stop request. Data parallel, before any
// backward: the loss is normalized by the predicted tokens of every rank and micro-batch, and every
// rank learns whether any rank was asked to stop (so all save together).
std::vector<data::Batch> Trainer::step_batches(StepResult& r) {
  std::vector<data::Batch> micro;
  for (int64_t i = 0; i < cfg_.train.grad_accum; ++i) {
    micro.push_back(next_batch());
    r.n_pred += micro.back().pred_positions.numel();
    r.tokens += micro.back().num_tokens;
  }
  r.stop = stop_requested();
  const auto counts = dist::sum_over_ranks(
      *group_, {static_cast<double>(r.n_pred), static_cast<double>(r.tokens), r.stop ? 1.0 : 0.0}, "step token counts");
  r.n_pred = std::llround(counts[0]);
  r.tokens = std::llround(counts[1]);
  r.stop = counts[2] > 0;
  return micro;
}

// Forward and backward of every micro-batch. The loss is the sum over every predicted token of the
// step divided by their total count (r.n_pred), so accumulation equals one large batch; fp16
// scales it by the loss scale. Returns the summed loss and correct predictions (on the device).
Trainer::StepSums Trainer::forward_backward(const std::vector<data::Batch>& micro, StepResult& r, PhaseClock& clock,
                                            bool abandon_on_stop) {
  const bool cuda = device_.is_cuda();
  const double loss_factor = (r.n_pred > 0 ? 1.0 / static_cast<double>(r.n_pred) : 0.0) * scaler_.scale();
  if (!sums_.loss.defined()) {
    auto acc_opts = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
    sums_ = {torch::zeros({}, acc_opts), torch::zeros({}, acc_opts)};
  }
  sums_.loss.zero_();
  sums_.correct.zero_();
  const StepSums& sums = sums_;
  for (size_t i = 0; i < micro.size(); ++i) {
    if (abandon_on_stop && !r.stop && stop_requested()) {  // a signal during the step (r.stop: before it)
      r.abandoned = r.stop = true;
      return sums;
    }
    const auto& b = micro[i];
    // Data parallel: only the last micro-batch's backward all-reduces (its hooks start the buckets).
    if (reducer_) reducer_->set_sync(i + 1 == micro.size());
    if (b.pred_positions.numel() == 0) continue;
    if (!device_.is_cpu()) model::check_token_ids(b.input_ids, model_->options().model().vocab_size);  // host batch
    const MicroInputs host{b.input_ids, b.attention_mask, b.pred_positions, b.pred_labels};
    if (graphs_) {
      graphs_->micro(host, r.n_pred, [&](const MicroInputs& in) { micro_step(in, loss_factor, sums); });
    } else {
      auto on_device = [&](const torch::Tensor& t) { return t.defined() ? t.to(device_, cuda) : t; };  // non-blocking from pinned memory
      micro_step({on_device(host.ids), on_device(host.mask), on_device(host.positions), on_device(host.labels)},
                 loss_factor, sums, [&] { clock.end(r.timings.forward); });
    }
    clock.end(r.timings.backward);  // graphed: forward and backward together
  }
  if (reducer_) reducer_->finish();  // .grad now holds the sum over ranks, identical on every rank
  return sums;
}

void Trainer::micro_step(const MicroInputs& in, double loss_factor, const StepSums& sums,
                         const std::function<void()>& after_forward) {
  torch::Tensor logits;
  {
    model::AutocastScope autocast(device_.type(), config::autocast_precision(cfg_));
    if (variant_.dense_head)  // (B*T, V), then the predicted rows: the cost the sparse head avoids
      logits = compute_->forward(in.ids, in.mask).view({-1, model_->options().model().vocab_size}).index_select(0, in.positions);
    else
      logits = compute_->forward_sparse(in.ids, in.mask, in.positions);  // (P, V)
  }
  auto ce = torch::nn::functional::cross_entropy(
      logits.to(torch::kFloat32), in.labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  if (after_forward) after_forward();
  (ce * loss_factor).backward();
  sums.loss.add_(ce.detach().to(torch::kFloat64));
  sums.correct.add_(logits.detach().argmax(-1).eq(in.labels).sum().to(torch::kFloat64));
  optimizer_->accumulate_gradients();  // bf16 parameters: into the fp32 gradients of the masters
}

// The defined gradients, unscaled for fp16 (and, for the tests, one made non-finite on request).
std::vector<torch::Tensor> Trainer::unscaled_gradients() {
  std::vector<torch::Tensor> grads = optimizer_->gradients();
  scaler_.unscale(grads);
  // Fault injection for the tests (tests/gpu): a non-finite gradient at one step (fp16: an overflow).
  if (!grads.empty() && fault_nonfinite_step_ == step_ + 1) grads.front().fill_(INFINITY);
  return grads;
}

// The sync-free exit: nothing is read back. The clip coefficient is applied on the device and a
// non-finite norm sets the sticky flag (in place: a captured update writes the same tensor), which the
// fused kernel takes as found_inf. The learning rate was set before (AdamW::set_lr).
void Trainer::update_unsynced() {
  auto grads = unscaled_gradients();
  const auto norm = gradient_norm(grads, device_);
  auto bad = norm.isfinite().logical_not().to(torch::kFloat32);
  if (!nonfinite_.defined()) nonfinite_ = torch::zeros_like(bad);
  nonfinite_.copy_(torch::maximum(nonfinite_, bad));
  if (cfg_.optimizer.grad_clip > 0 && !grads.empty())
    torch::_foreach_mul_(grads, (cfg_.optimizer.grad_clip / (norm + 1e-6)).clamp_max(1.0));
  optimizer_->update(nonfinite_);
  optimizer_->zero_grad();
}

// The synced exit: one read-back of the norm, loss and accuracy (of the global batch), then a
// non-finite step is skipped (fp16: halve the loss scale) or the gradients are clipped and applied.
void Trainer::update_synced(std::vector<torch::Tensor>& grads, const torch::Tensor& norm, StepSums sums,
                            StepResult& r) {
  std::vector<torch::Tensor> both = {sums.loss, sums.correct};
  dist::sum_over_ranks(*group_, both, "step loss");  // loss and accuracy of the global batch
  sums = {both[0], both[1]};
  const double inv_pred = r.n_pred > 0 ? 1.0 / static_cast<double>(r.n_pred) : 0.0;
  r.grad_norm = norm.item<double>();  // the one host sync of a synced step
  r.loss = sums.loss.item<double>() * inv_pred;
  r.accuracy = sums.correct.item<double>() * inv_pred;
  r.finite = std::isfinite(r.grad_norm) && std::isfinite(r.loss);
  if (nonfinite_.defined() && nonfinite_.item<float>() != 0.0f) {  // set by an earlier unsynced step
    r.finite = false;
    r.nonfinite_earlier = true;
  }
  if (!r.finite) {
    optimizer_->zero_grad();
    r.skipped = scaler_.update(false);  // fp16: skipped, the scale halved; otherwise the run stops (check_finite)
    return;
  }
  if (cfg_.optimizer.grad_clip > 0 && r.grad_norm > cfg_.optimizer.grad_clip)
    torch::_foreach_mul_(grads, cfg_.optimizer.grad_clip / (r.grad_norm + 1e-6));
  optimizer_->step(schedule_->lr(step_), torch::Tensor());
  optimizer_->zero_grad();
  scaler_.update(true);
}

// Data parallel: each rank evaluates every W-th batch of the fixed validation set and the sums are
// all-reduced, so the figures are those of the whole set (as a single process computes them, up to
// float64 rounding of the loss sum) in 1/W of the time.
void Trainer::run_eval() {
  if (eval_batches_.empty()) return;
  const EvalResult r = sum_over_ranks(*group_, evaluate_mlm(compute_, dist::rank_share(*group_, eval_batches_), device_,
                                                            config::autocast_precision(cfg_)));
  last_eval_ = r;  // seconds: this rank's wall time
  if (!main_rank()) return;
  if (r.n_predicted == 0) {  // metrics over no predictions are no result: none is recorded
    spdlog::warn("eval step {}: no position was chosen for prediction in {} validation sequences (eval.mask_prob {}); "
                 "nothing to measure, no eval record written: raise eval.mask_prob or eval.max_sequences",
                 step_, r.n_sequences, cfg_.eval.mask_prob);
    return;
  }
  spdlog::info("eval step {} | MLM accuracy {:.4f} | top-5 {:.4f} | loss {:.4f} | perplexity {:.2f} | {} predicted "
               "tokens in {} sequences | {:.1f}s",
               step_, r.accuracy, r.top5_accuracy, r.loss, r.perplexity, r.n_predicted, r.n_sequences, r.seconds);
  record({{"type", "eval"}, {"step", step_}, {"loss", r.loss}, {"accuracy", r.accuracy},
          {"top5_accuracy", r.top5_accuracy}, {"perplexity", r.perplexity},
          {"n_predicted", r.n_predicted}, {"n_sequences", r.n_sequences}, {"seconds", r.seconds}});
}

// Resolves train.device once (CUDA always with its index) and makes it the process's current
// device before anything allocates on it: pinned host memory, streams and synchronize follow it.
void Trainer::setup_device() {
  device_ = core::resolve_device(cfg_.train.device, "train.device");
  config::resolve_param_dtype(cfg_, device_.is_cuda());  // before config.yaml is written
  if (env_.distributed() && device_.is_cuda()) {  // each rank drives the GPU of its LOCAL_RANK
    const auto visible = static_cast<int>(torch::cuda::device_count());
    if (env_.local_rank >= visible)
      throw Error(fmt::format("LOCAL_RANK is {} but this node has {} visible CUDA device(s): start at most {} "
                              "process(es) per node (torchrun --nproc-per-node)", env_.local_rank, visible, visible));
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env_.local_rank));
  }
  core::use_device(device_);
  setup_distributed();  // a world of one unless a launcher started this process
  if (cfg_.train.precision == config::Precision::kFp16 && !device_.is_cuda())
    throw Error("train.precision fp16 needs CUDA; use fp32 or bf16 on the CPU");
  if (cfg_.train.num_threads > 0) torch::set_num_threads(static_cast<int>(cfg_.train.num_threads));
  // Before the data and the model are built; the vocabulary is the configured one until the tokenizer is loaded.
  check_memory(cfg_.model.vocab_size > 0 ? cfg_.model.vocab_size : cfg_.tokenizer.vocab_size);
}

void Trainer::check_memory(int64_t vocab_size) const {
  check_training_memory(cfg_, vocab_size, core::device_memory_bytes(device_), device_.str());
}

void Trainer::use_synthetic_data(int64_t vocab_size) {
  if (vocab_size < 6)
    throw Error(fmt::format("synthetic data needs model.vocab_size of at least 6 (5 special tokens + 1), got {}; "
                            "e.g. --set model.vocab_size=8000", vocab_size));
  cfg_.model.vocab_size = vocab_size;
  auto opts = data::loader_options_from_config(cfg_, cfg_.train.batch_size);
  opts.seed = cfg_.train.seed;
  opts.pin_memory = device_.is_cuda();
  synthetic_ = std::make_unique<SyntheticBatches>(vocab_size, opts);
}

void Trainer::setup_data() {
  setup_tokenizer();
  train_corpus_ = prepare(cfg_.data.train_files, "train");
  if (!cfg_.data.valid_files.empty()) valid_corpus_ = prepare(cfg_.data.valid_files, "valid");

  auto loader_opts = data::loader_options_from_config(cfg_, cfg_.train.batch_size);
  loader_opts.seed = cfg_.train.seed;
  loader_opts.pin_memory = device_.is_cuda();
  loader_opts.rank = env_.rank;  // each rank reads its rows of every global batch
  loader_opts.world_size = env_.world_size;
  loader_ = std::make_unique<data::MlmLoader>(train_corpus_, loader_opts);
  if (valid_corpus_) {
    auto eval_opts = data::eval_loader_options(cfg_, cfg_.eval.batch_size);
    eval_opts.pin_memory = device_.is_cuda();
    eval_batches_ = data::make_eval_batches(valid_corpus_, eval_opts, cfg_.eval.max_sequences, cfg_.eval.batch_size,
                                            cfg_.eval.seed);
  }
}

void Trainer::setup_distributed() {
  dist::ProcessGroupOptions o;
  o.backend = cfg_.distributed.backend;
  o.timeout = std::chrono::seconds(cfg_.distributed.timeout_s);
  group_ = std::make_unique<dist::ProcessGroup>(env_, device_, o);  // world of one: no store, identity collectives
  if (!env_.distributed()) return;
  spdlog::info("data-parallel run: {} processes (launched by {}), {} backend, rendezvous {}:{}; this is rank 0 on {}",
               env_.world_size, env_.launcher, group_->backend(), env_.master_addr, env_.master_port, device_.str());
}

// Data parallel: every rank must run the same command. The ranks compare a hash of their resolved
// config and checkpoint choice (an all-gather) before anything depends on them, so a rank started
// with other overrides, or one that sees another checkpoint (a run directory that is not shared),
// stops the run with a message naming it instead of training something else.
void Trainer::check_ranks_start_alike() {
  core::Hasher h;
  const std::string resolved =
      config::to_yaml(cfg_) + "\nresume: " + resume_dir_ + "\ninit-from: " + (init_ ? init_->dir : std::string());
  h.update(resolved.data(), resolved.size());
  const auto differ = dist::ranks_differing_from_rank0(*group_, h.digest(), "start-up check of the ranks' configs");
  if (!differ.empty())
    throw Error(fmt::format("rank(s) {} resolved another config or checkpoint than rank 0 (this rank resumes from "
                            "'{}'): every rank must run the same command (config, --set, --resume) on a run "
                            "directory all of them see",
                            dist::format_ranks(differ), resume_dir_.empty() ? "nothing" : resume_dir_));
}

// Everything before the first step: launcher environment, device, run directory, process group,
// data (rank 0 first), model and optimizer, then the checkpoint or the --init-from weights.
void Trainer::start_run() {
  env_ = dist::detect_dist_env();
  set_log_rank(env_.rank);
  setup_device();  // first: a device that does not exist leaves no run directory behind
  setup_run_dir();
  spdlog::info("run directory {} | device {} | precision {}", run_dir_, device_.str(),
               config::to_string(cfg_.train.precision));
  check_ranks_start_alike();
  if (main_rank()) {
    setup_data();  // rank 0 trains the tokenizer and prepares the data into the run directory ...
    group_->barrier("waiting for rank 0 to prepare the tokenizer and data");
  } else {
    group_->barrier("waiting for rank 0 to prepare the tokenizer and data");
    setup_data();  // ... the other ranks then find them there
  }
  setup_model_and_optimizer();
  checkpointer_ = std::make_unique<checkpoint::Checkpointer>(ckpt_dir_, cfg_.checkpoint.keep_last, *group_, env_.rank, world_size());
  if (init_) load_init_weights(*init_, *model_);
  dist::broadcast_parameters(*group_, optimizer_->params());  // start identical, whatever each rank's init did
  optimizer_->loaded();  // bf16 parameters: the compute model takes the weights
  if (!main_rank()) torch::manual_seed(checkpoint::rank_seed(cfg_.train.seed, env_.rank, 0));  // own dropout stream
  if (main_rank()) metrics_ = MetricsWriter((fs::path(run_dir_) / "metrics.jsonl").string());
  if (!resume_dir_.empty()) {
    load_checkpoint(resume_dir_);
    optimizer_->loaded();
    if (main_rank()) metrics_.resume_from(resume_dir_);  // the records up to the checkpoint's step
    // The same path may still hold other bytes on another node.
    const auto agreement = dist::check_parameters_agree(*group_, optimizer_->params());
    if (!agreement.agree)
      throw Error(fmt::format("after loading {}: {}. The ranks read different checkpoints: the run directory must "
                              "be on a filesystem every rank sees", resume_dir_, agreement.message()));
  } else if (main_rank() && fs::exists(metrics_.path()) && fs::file_size(metrics_.path()) > 0) {
    spdlog::warn("{} already holds records from an earlier run; new records are appended", metrics_.path());
  }
  if (main_rank() && cfg_.logging.tensorboard)  // after the checkpoint: a resumed session starts past its step
    tensorboard_.emplace(cfg_, run_dir_, resume_dir_.empty() ? std::nullopt : std::optional<int64_t>(step_),
                         metrics_.path());
  if (init_) {
    spdlog::info("new run from the weights of {} {} (fresh optimizer and schedule)", init_->kind, init_->dir);
    run_eval();  // step 0: the starting model, the figures `roformer eval` gives the source
  }
}

// A non-finite loss or gradient norm ends the run without saving: weights that already gave one
// (or were blown up by a huge learning rate) would fail again on resume. The advice names a
// checkpoint from before the failure. last_synced: the last step whose values were read back.
void Trainer::check_finite(const StepResult& r, int64_t last_synced) const {
  if (r.finite || r.skipped) return;
  if (r.nonfinite_earlier)  // set by an unsynced step after last_synced, which started from its state
    throw Error(fmt::format("non-finite loss or gradient norm between steps {} and {} (found at step {}; updates "
                            "stopped at the first one). {}", last_synced + 1, step_ + 1, step_ + 1,
                            nonfinite_resume_advice(ckpt_dir_, run_dir_, last_synced - 1)));
  throw Error(fmt::format("non-finite loss ({}) or gradient norm ({}) at step {}. {}", r.loss, r.grad_norm, step_ + 1,
                          nonfinite_resume_advice(ckpt_dir_, run_dir_, step_ - 1)));
}

// The logging step: the log line (window means) and the metrics record (fp16: the loss scale;
// MFU where the device's peak is known).
void Trainer::log_step(const StepResult& r, MetricsWindow& window, ProgressReporter& progress) {
  const ProgressStats ps = window.close(step_, cfg_.train.steps, schedule_->lr(step_ - 1));
  progress.log_line(ps);
  if (!main_rank()) return;
  json rec = {{"type", "train"}, {"step", step_}, {"loss", r.loss}, {"loss_avg", ps.loss},
              {"accuracy", r.accuracy}, {"lr", ps.lr}, {"grad_norm", r.grad_norm},
              {"tokens_per_s", ps.tokens_per_s}, {"ms_per_step", ps.ms_per_step}, {"tokens_seen", tokens_seen_},
              {"data_wait_s", r.timings.data}};
  if (scaler_.dynamic()) rec["loss_scale"] = scaler_.scale();
  if (const auto mfu = model_flops_utilization(r.n_pred, ps.ms_per_step)) rec["mfu"] = *mfu;
  record(rec);
}

void Trainer::record(const json& rec) {
  try {
    metrics_.write(rec);
  } catch (const Error& e) {
    stop_for_failed_write(e.what());
  }
  if (tensorboard_) tensorboard_->write(rec);
}

void Trainer::stop_for_failed_write(const std::string& what) {
  std::string kept;
  if (world_size() == 1) {  // a save is collective: with other ranks it would wait for them
    try {
      save_checkpoint("a failed write: " + what);
      kept = fmt::format("the {} steps trained were saved in {}", step_,
                         (fs::path(ckpt_dir_) / checkpoint::checkpoint_name(step_)).string());
    } catch (const std::exception& e) {
      kept = fmt::format("no checkpoint could be saved either ({}); earlier checkpoints are kept as they were", e.what());
    }
  } else {
    kept = "earlier checkpoints are kept as they were";
  }
  throw Error(fmt::format("{}: training stopped at step {} rather than go on without its record; {}. Free space (or "
                          "fix the cause), then continue with: roformer train --run-dir {} --resume auto",
                          what, step_, kept, run_dir_));
}

std::optional<double> Trainer::model_flops_utilization(int64_t n_pred, double ms_per_step) const {
  if (!device_.is_cuda() || ms_per_step <= 0) return std::nullopt;
  const double peak_tflops = known_peak_tflops(core::device_name(device_), cfg_.train.precision);
  if (peak_tflops <= 0) return std::nullopt;
  const double flops =
      model::mlm_train_flops_per_step(model_->options(), global_batch(), cfg_.data.max_seq_len, n_pred);
  return flops / (ms_per_step / 1000.0) / (peak_tflops * 1e12 * static_cast<double>(world_size()));
}

// A stop signal (SIGINT/SIGTERM): save and say how to resume. Distributed, r.stop is the ranks'
// agreed decision (a signal after the step's start waits a step). Returns whether the run stops.
bool Trainer::stop_if_asked(const StepResult& r) {
  if (!r.stop && !(world_size() == 1 && stop_requested())) return false;
  const std::string why = stop_signal() != 0 ? fmt::format("signal {}", stop_signal()) : "a signal to another rank";
  save_checkpoint(why);
  const std::string launch =
      world_size() > 1 ? fmt::format("launching the same {} processes with: roformer train", world_size())
                       : "roformer train";
  spdlog::info("stopped by {} at step {}/{}. Resume {}{} --run-dir {} --resume auto", why, step_, cfg_.train.steps,
               world_size() > 1 ? "by " : "with: ", launch, run_dir_);
  return true;
}

void Trainer::report_done() const {
  if (last_eval_)
    spdlog::info("done: {} steps, {} tokens | validation MLM accuracy {:.4f} (loss {:.4f}, perplexity {:.2f})",
                 step_, tokens_seen_, last_eval_->accuracy, last_eval_->loss, last_eval_->perplexity);
  else
    spdlog::info("done: {} steps, {} tokens ({})", step_, tokens_seen_,
                 eval_batches_.empty() ? "no validation data configured"
                                       : "nothing left to train, so no evaluation ran; metrics.jsonl has the last one");
  spdlog::info("final checkpoint: {}", (fs::path(ckpt_dir_) / checkpoint::checkpoint_name(step_)).string());
}

int Trainer::run() {
  start_run();
  const Cadence cadence = Cadence::from(cfg_);
  spdlog::info("training {} steps from step {} | {} sequences x {} tokens per step ({} micro-batch(es){}) | {} "
               "training sequences per epoch",
               cadence.total, step_, global_batch(), cfg_.data.max_seq_len, cfg_.train.grad_accum,
               world_size() > 1 ? fmt::format(" of {} on each of {} ranks", cfg_.train.batch_size, world_size()) : "",
               loader_->sequences_per_epoch());
  install_stop_handlers();
  ProgressReporter progress(main_rank() ? cfg_.logging.progress : "plain");  // other ranks: info lines are off
  MetricsWindow window;
  int64_t last_synced = step_;  // a non-finite value found later arose after this step
  while (step_ < cadence.total) {
    const auto t0 = std::chrono::steady_clock::now();
    // The same decision on every rank; a step during which a stop was requested syncs as well.
    const StepResult r = train_step(cadence.syncs(step_ + 1));
    if (r.abandoned) {  // stopped inside the step: saved as of the last complete one
      progress.clear();
      spdlog::info("step {} was given up at the stop signal; it is trained again on resume", step_ + 1);
      stop_if_asked(r);
      return 0;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.finite && !r.skipped) progress.clear();
    check_finite(r, last_synced);
    if (r.skipped) spdlog::warn("step {}: non-finite fp16 gradient, step skipped, loss scale now {}", step_ + 1, scaler_.scale());
    ++step_;
    tokens_seen_ += r.tokens;
    if (r.synced) last_synced = step_;
    window.add({seconds, r.tokens, r.synced, r.loss, r.accuracy, r.grad_norm});
    progress.update(window.live(step_, cadence.total, schedule_->lr(step_ - 1)));
    if (cadence.logs(step_)) log_step(r, window, progress);
    if (main_rank()) {
      if (const std::string failed = log_file_failure(); !failed.empty()) stop_for_failed_write(failed);
    }
    if (cadence.evaluates(step_) || cadence.saves(step_) || r.stop || stop_requested()) progress.clear();
    if (cadence.evaluates(step_)) run_eval();
    if (cadence.saves(step_)) save_checkpoint(step_ == cadence.total ? "end of training" : "periodic");
    if (stop_if_asked(r)) return 0;
  }
  progress.clear();
  if (tensorboard_) tensorboard_->finish(step_);  // the HParams session ends
  report_done();
  return 0;
}

}  // namespace roformer::train
