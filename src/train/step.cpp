// TrainStep: one optimizer step over grad_accum micro-batches (the batches, forward and backward of
// each, the gradient norm, clipping and AdamW), shared by `roformer train`, `roformer bench` and the
// step tests; see train/step.h. Its two exits: a synced update that reads the norm, loss and
// accuracy back, and a sync-free one that a CUDA graph can capture (StepMode).
#include "train/step.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "checkpoint/checkpointer.h"
#include "core/device.h"
#include "core/error.h"
#include "dist/collectives.h"
#include "dist/gradient_reducer.h"
#include "dist/process_group.h"
#include "kernels/cross_entropy.h"
#include "kernels/fp8_linear.h"
#include "model/autocast.h"
#include "model/kernel_policy.h"
#include "train/batch_source.h"
#include "train/memory_check.h"
#include "train/optimizer.h"
#include "train/placement.h"
#include "train/schedule.h"
#include "train/signals.h"

namespace roformer::train {

// Ends the stages of a step (StepTimings): seconds since the previous end, with a device
// synchronize first when timings are to be exact (StepOptions::sync_timings).
class StageClock {
 public:
  StageClock(const c10::Device& device, bool synchronize)
      : device_(device), synchronize_(synchronize && device.is_cuda()), last_(std::chrono::steady_clock::now()) {}
  void end(double& seconds) {
    if (synchronize_) core::synchronize(device_);
    const auto now = std::chrono::steady_clock::now();
    seconds += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  c10::Device device_;
  bool synchronize_;
  std::chrono::steady_clock::time_point last_;
};

namespace {

// The global gradient norm (after unscaling for fp16); clipping follows in the update.
torch::Tensor gradient_norm(const std::vector<torch::Tensor>& grads, const torch::Device& device) {
  if (grads.empty()) return torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  return torch::stack(torch::_foreach_norm(grads)).to(torch::kFloat32).norm();
}

}  // namespace

std::string to_string(StepMode mode) {
  switch (mode) {
    case StepMode::kSynced: return "synced";
    case StepMode::kSyncFree: return "sync-free";
    case StepMode::kGraphed: return "graphed";
  }
  return "?";
}

TrainStep::TrainStep(const config::Config& cfg, int64_t vocab_size, const Placement& placement, StepOptions options)
    : cfg_(cfg), options_(std::move(options)), device_(placement.device()), group_(placement.group()),
      scaler_(cfg.train.precision == config::Precision::kFp16) {
  if (cfg_.model.vocab_size != 0 && cfg_.model.vocab_size != vocab_size)
    throw Error(fmt::format("model.vocab_size is {} but the tokenizer has {} pieces; set model.vocab_size: 0 to "
                            "take it from the tokenizer", cfg_.model.vocab_size, vocab_size));
  check_training_memory(cfg_, vocab_size, core::device_memory_bytes(device_), device_.str());
  torch::manual_seed(static_cast<uint64_t>(cfg_.train.seed));
  model_ = model::RoFormerForMaskedLM(model::RoFormerOptions(cfg_.model, vocab_size).pad_token_id(options_.pad_token_id));
  model_->to(device_);
  model_->train();
  const config::ModelConfig& m = cfg_.model;
  spdlog::info("model: {} parameters ({} layers, hidden {}, {} heads, embedding {}, {}-LN, {}{}, {} attention, {})",
               model_->num_parameters(), m.num_layers, m.hidden_size, m.num_heads,
               config::effective_embedding_size(m), config::to_string(m.norm), config::to_string(m.hidden_act),
               m.bias ? "" : ", no biases", config::to_string(m.attention), model_->positions().description());

  // bf16 parameters: the step runs a bf16 copy and AdamW keeps model_ as the fp32 master weights.
  compute_ = cfg_.train.param_dtype == config::ParamDtype::kBf16 ? make_bf16_compute_model(model_) : model_;
  optimizer_ = std::make_unique<AdamW>(model_, compute_, cfg_.optimizer);
  // The reducer sums the gradients of the optimizer's parameters. With master weights they are the fp32 masters, which
  // no backward reaches: finish() then all-reduces the accumulated fp32 gradients after the last
  // micro-batch (no overlap with backward, but the sum over ranks in fp32).
  dist::GradientReducerOptions ro;
  ro.bucket_mb = cfg_.distributed.bucket_mb;
  reducer_ = dist::make_gradient_reducer(group_, optimizer_->params(), ro);  // none for a world of one
  schedule_ = std::make_unique<LrSchedule>(cfg_.schedule, cfg_.optimizer.lr, cfg_.train.steps);
  const auto sum_options = torch::TensorOptions().dtype(torch::kFloat64).device(device_);
  sums_ = {torch::zeros({}, sum_options), torch::zeros({}, sum_options)};  // at fixed addresses: graphs write them
  resolve_mode();
}

TrainStep::~TrainStep() = default;

// The mode (StepMode) from the device, the config and the options, decided here once; the steps
// only compare it. Each reason names what to change.
void TrainStep::resolve_mode() {
  const bool cuda = device_.is_cuda();
  std::string why;
  if (!cuda && !options_.sync_free_on_cpu) why = "the CPU";
  else if (scaler_.dynamic()) why = "fp16 reads its loss scale back";
  else if (!optimizer_->fused()) why = "optimizer.fused is false";
  if (!why.empty()) {
    mode_ = StepMode::kSynced;
    spdlog::info("training step: each step waits for its loss before the next one starts ({}{})", why,
                 cuda ? "; the GPU idles while the loss is read" : ": running ahead would gain nothing");
    return;
  }
  if (!cfg_.train.cuda_graph) why = "train.cuda_graph is false";
  else if (!cuda) why = "the CPU";
  else if (!StepGraphs::supported()) why = "this build has a CPU-only LibTorch";
  else if (group_.communicates()) why = "data parallel runs keep the step eager";
  else if (cfg_.model.gradient_checkpointing) why = "model.gradient_checkpointing is on";
  else if (options_.sync_timings) why = "per-stage timings synchronize between the stages";
  if (!why.empty()) {
    mode_ = StepMode::kSyncFree;
    spdlog::info("training step: steps are queued on the GPU without waiting for their losses, which are read at "
                 "logging steps only; each kernel is launched on its own (CUDA graphs: off, {})", why);
    return;
  }
  mode_ = StepMode::kGraphed;
  graphs_ = std::make_unique<StepGraphs>();
  spdlog::info("training step: steps are queued on the GPU without waiting for their losses, which are read at "
               "logging steps only, and replayed as recorded launch sequences (CUDA graphs: on, one a micro-batch "
               "shape and one for the update; train.cuda_graph: false turns them off)");
}

double TrainStep::learning_rate(int64_t step) const { return schedule_->lr(step); }

void TrainStep::save(checkpoint::TrainerState& state) {
  optimizer_->sync_step_counts();
  state.step = steps_done_;
  state.tokens_seen = tokens_seen_;
  scaler_.save(state);
}

void TrainStep::restore(const checkpoint::TrainerState& state) {
  steps_done_ = state.step;
  tokens_seen_ = state.tokens_seen;
  scaler_.restore(state);
  optimizer_->loaded();
}

void TrainStep::weights_loaded() { optimizer_->loaded(); }

// One optimizer step over grad_accum micro-batches; the mode says how it synchronizes (StepMode).
StepResult TrainStep::run(BatchSource& batches, bool host_sync) {
  // Tests only: the allocator's out-of-memory error, as a too-large batch raises it on a device.
  TORCH_CHECK_WITH(OutOfMemoryError, options_.faults.oom_at_step != steps_done_ + 1,
                   "CUDA out of memory. Tried to allocate 2.00 GiB (ROFORMER_FAULT_OOM_AT_STEP)");
  StepResult r;
  StageClock clock(device_, options_.sync_timings);
  // A long step (many micro-batches) is given up when a stop signal arrives during it, so a run asked
  // to stop stops within a micro-batch: the data position and the random generators are rewound to
  // the step's start, so the resumed run repeats it exactly. Distributed, the ranks decide together
  // at the step's start instead.
  std::optional<data::LoaderState> data_start;
  std::vector<torch::Tensor> rng_start;
  if (group_.world_size() == 1 && cfg_.train.grad_accum > 1) data_start = batches.position();  // none: synthetic
  const bool abandonable = data_start.has_value();
  if (abandonable) rng_start = checkpoint::get_rng_states();
  const std::vector<data::Batch> micro = step_batches(batches, r);
  clock.end(r.timings.data);
  r.synced = host_sync || r.stop || mode_ == StepMode::kSynced;
  forward_backward(micro, r, clock, abandonable);
  if (r.abandoned) {
    optimizer_->zero_grad();
    batches.rewind(*data_start);
    checkpoint::set_rng_states(rng_start);
    return r;
  }
  // Graphs need the gradients at fixed addresses from the first backward on.
  if (graphs_ && !optimizer_->keeps_gradients()) optimizer_->keep_gradients();
  if (r.synced) {
    update_synced(r);
  } else {
    optimizer_->set_lr(schedule_->lr(steps_done_));  // outside the graph: a device tensor the update reads
    if (graphs_ && options_.faults.nonfinite_grad_at_step != steps_done_ + 1)
      graphs_->update([this] { update_unsynced(); });
    else
      update_unsynced();
  }
  clock.end(r.timings.optimizer);
  ++steps_done_;
  tokens_seen_ += r.tokens;
  return r;
}

// The step's micro-batches, their token counts and the stop request. Data parallel, before any
// backward: the loss is normalized by the predicted tokens of every rank and micro-batch, and every
// rank learns whether any rank was asked to stop (so all save together).
std::vector<data::Batch> TrainStep::step_batches(BatchSource& batches, StepResult& r) {
  std::vector<data::Batch> micro;
  for (int64_t i = 0; i < cfg_.train.grad_accum; ++i) {
    micro.push_back(batches.next());
    r.n_pred += micro.back().pred_positions.numel();
    r.tokens += micro.back().num_tokens;
  }
  r.stop = stop_requested();
  const auto counts = dist::sum_over_ranks(
      group_, {static_cast<double>(r.n_pred), static_cast<double>(r.tokens), r.stop ? 1.0 : 0.0}, "step token counts");
  r.n_pred = std::llround(counts[0]);
  r.tokens = std::llround(counts[1]);
  r.stop = counts[2] > 0;
  return micro;
}

// Forward and backward of every micro-batch. The loss is the sum over every predicted token of the
// step divided by their total count (r.n_pred), so accumulation equals one large batch; fp16
// scales it by the loss scale. The summed loss and correct predictions collect in sums_ (on the device).
void TrainStep::forward_backward(const std::vector<data::Batch>& micro, StepResult& r, StageClock& clock,
                                 bool abandon_on_stop) {
  const bool cuda = device_.is_cuda();
  const double loss_factor = (r.n_pred > 0 ? 1.0 / static_cast<double>(r.n_pred) : 0.0) * scaler_.scale();
  sums_.loss.zero_();
  sums_.correct.zero_();
  for (size_t i = 0; i < micro.size(); ++i) {
    if (abandon_on_stop && !r.stop && stop_requested()) {  // a signal during the step (r.stop: before it)
      r.abandoned = r.stop = true;
      return;
    }
    const auto& b = micro[i];
    // Data parallel: only the last micro-batch's backward all-reduces (its hooks start the buckets).
    if (reducer_) reducer_->set_sync(i + 1 == micro.size());
    if (b.pred_positions.numel() == 0) continue;
    if (!device_.is_cpu()) model::check_token_ids(b.input_ids, model_->options().model().vocab_size);  // host batch
    const MicroInputs host{b.input_ids, b.attention_mask, b.pred_positions, b.pred_labels};
    if (graphs_) {
      graphs_->micro(host, r.n_pred, [&](const MicroInputs& in) { micro_step(in, loss_factor); });
    } else {
      auto on_device = [&](const torch::Tensor& t) { return t.defined() ? t.to(device_, cuda) : t; };  // non-blocking from pinned memory
      micro_step({on_device(host.ids), on_device(host.mask), on_device(host.positions), on_device(host.labels)},
                 loss_factor, [&] { clock.end(r.timings.forward); });
    }
    clock.end(r.timings.backward);  // graphed: forward and backward together
  }
  if (reducer_) reducer_->finish();  // .grad now holds the sum over ranks, identical on every rank
}

void TrainStep::micro_step(const MicroInputs& in, double loss_factor, const std::function<void()>& after_forward) {
  torch::Tensor logits;
  {
    model::AutocastScope autocast(device_.type(), config::autocast_precision(cfg_));
    kernels::Fp8Scope fp8(cfg_.train.fp8 != config::Fp8::kOff);  // the encoder's linear layers (train.fp8)
    logits = compute_->forward_sparse(in.ids, in.mask, in.positions);  // (P, V)
  }
  torch::Tensor ce, hits;  // () the summed loss; () the predictions equal to their label
  if (model::kernel_policy().fused_cross_entropy) {
    auto out = kernels::cross_entropy_sum(logits, in.labels, kernels::backend_for(logits.device()));
    ce = out.loss;
    hits = out.correct;
  } else {
    ce = torch::nn::functional::cross_entropy(logits.to(torch::kFloat32), in.labels,
                                              torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  }
  if (after_forward) after_forward();
  (ce * loss_factor).backward();
  sums_.loss.add_(ce.detach().to(torch::kFloat64));
  if (!hits.defined()) hits = logits.detach().argmax(-1).eq(in.labels).sum();
  sums_.correct.add_(hits.to(torch::kFloat64));
  optimizer_->accumulate_gradients();  // bf16 parameters: into the fp32 gradients of the masters
}

// The defined gradients, unscaled for fp16 (and, for the tests, one made non-finite on request).
std::vector<torch::Tensor> TrainStep::unscaled_gradients() {
  std::vector<torch::Tensor> grads = optimizer_->gradients();
  scaler_.unscale(grads);
  // Fault injection for the tests (tests/gpu): a non-finite gradient at one step (fp16: an overflow).
  if (!grads.empty() && options_.faults.nonfinite_grad_at_step == steps_done_ + 1) grads.front().fill_(INFINITY);
  return grads;
}

// The sync-free exit: nothing is read back. The clip coefficient is applied on the device and a
// non-finite norm sets the sticky flag (in place: a captured update writes the same tensor), which the
// fused kernel takes as found_inf. The learning rate was set before (AdamW::set_lr).
void TrainStep::update_unsynced() {
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
void TrainStep::update_synced(StepResult& r) {
  const auto grads = unscaled_gradients();
  const auto norm = gradient_norm(grads, device_);
  std::vector<torch::Tensor> sums = {sums_.loss, sums_.correct};
  dist::sum_over_ranks(group_, sums, "step loss");  // loss and accuracy of the global batch
  const double inv_pred = r.n_pred > 0 ? 1.0 / static_cast<double>(r.n_pred) : 0.0;
  r.grad_norm = norm.item<double>();  // the one host sync of a synced step
  r.loss = sums[0].item<double>() * inv_pred;
  r.accuracy = sums[1].item<double>() * inv_pred;
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
  optimizer_->step(schedule_->lr(steps_done_), torch::Tensor());
  optimizer_->zero_grad();
  scaler_.update(true);
}

}  // namespace roformer::train
