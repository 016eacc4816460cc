// Trainer::train_step: one optimizer step over grad_accum micro-batches (the batches, forward and
// backward of each, the gradient norm, clipping and AdamW), shared by `roformer train`, `roformer
// bench` and the step tests. Its two exits: a synced update that reads the norm, loss and accuracy
// back, and a sync-free one that a CUDA graph can capture (see train_step below).
#include <cmath>
#include <optional>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "dist/collectives.h"
#include "dist/gradient_reducer.h"
#include "dist/process_group.h"
#include "model/autocast.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/signals.h"
#include "train/trainer.h"
#include "train/training_data.h"
#include "core/device.h"

namespace roformer::train {

void PhaseClock::end(double& seconds) {
  if (synchronize_) core::synchronize(device_);
  const auto now = std::chrono::steady_clock::now();
  seconds += std::chrono::duration<double>(now - last_).count();
  last_ = now;
}

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
  TORCH_CHECK_WITH(OutOfMemoryError, plan_.faults.oom_at_step != loop_.step + 1,
                   "CUDA out of memory. Tried to allocate 2.00 GiB (ROFORMER_FAULT_OOM_AT_STEP)");
  StepResult r;
  PhaseClock clock(device_, plan_.sync_timings);
  // A long step (many micro-batches) is given up when a stop signal arrives during it, so a run asked
  // to stop stops within a micro-batch: the data position and the random generators are rewound to
  // the step's start, so the resumed run repeats it exactly. Distributed, the ranks decide together
  // at the step's start instead.
  std::optional<data::LoaderState> data_start;
  std::vector<torch::Tensor> rng_start;
  if (world_size() == 1 && plan_.cfg.train.grad_accum > 1) data_start = data_->position();  // none: synthetic
  const bool abandonable = data_start.has_value();
  if (abandonable) rng_start = checkpoint::get_rng_states();
  const std::vector<data::Batch> micro = step_batches(r);
  clock.end(r.timings.data);
  r.synced = host_sync || r.stop || (!device_.is_cuda() && !plan_.sync_free_on_cpu) || scaler_.dynamic() ||
             !optimizer_->fused();
  forward_backward(micro, r, clock, abandonable);
  if (r.abandoned) {
    optimizer_->zero_grad();
    data_->rewind(*data_start);
    checkpoint::set_rng_states(rng_start);
    return r;
  }
  // Graphs need the gradients at fixed addresses from the first backward on.
  if (graphs_ && !optimizer_->keeps_gradients()) optimizer_->keep_gradients();
  if (r.synced) {
    update_synced(r);
  } else {
    optimizer_->set_lr(schedule_->lr(loop_.step));  // outside the graph: a device tensor the update reads
    if (graphs_ && plan_.faults.nonfinite_grad_at_step != loop_.step + 1)
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
  for (int64_t i = 0; i < plan_.cfg.train.grad_accum; ++i) {
    micro.push_back(data_->next());
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
// scales it by the loss scale. The summed loss and correct predictions collect in sums_ (on the device).
void Trainer::forward_backward(const std::vector<data::Batch>& micro, StepResult& r, PhaseClock& clock,
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

void Trainer::micro_step(const MicroInputs& in, double loss_factor, const std::function<void()>& after_forward) {
  torch::Tensor logits;
  {
    model::AutocastScope autocast(device_.type(), config::autocast_precision(plan_.cfg));
    logits = compute_->forward_sparse(in.ids, in.mask, in.positions);  // (P, V)
  }
  auto ce = torch::nn::functional::cross_entropy(
      logits.to(torch::kFloat32), in.labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  if (after_forward) after_forward();
  (ce * loss_factor).backward();
  sums_.loss.add_(ce.detach().to(torch::kFloat64));
  sums_.correct.add_(logits.detach().argmax(-1).eq(in.labels).sum().to(torch::kFloat64));
  optimizer_->accumulate_gradients();  // bf16 parameters: into the fp32 gradients of the masters
}

// The defined gradients, unscaled for fp16 (and, for the tests, one made non-finite on request).
std::vector<torch::Tensor> Trainer::unscaled_gradients() {
  std::vector<torch::Tensor> grads = optimizer_->gradients();
  scaler_.unscale(grads);
  // Fault injection for the tests (tests/gpu): a non-finite gradient at one step (fp16: an overflow).
  if (!grads.empty() && plan_.faults.nonfinite_grad_at_step == loop_.step + 1) grads.front().fill_(INFINITY);
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
  if (plan_.cfg.optimizer.grad_clip > 0 && !grads.empty())
    torch::_foreach_mul_(grads, (plan_.cfg.optimizer.grad_clip / (norm + 1e-6)).clamp_max(1.0));
  optimizer_->update(nonfinite_);
  optimizer_->zero_grad();
}

// The synced exit: one read-back of the norm, loss and accuracy (of the global batch), then a
// non-finite step is skipped (fp16: halve the loss scale) or the gradients are clipped and applied.
void Trainer::update_synced(StepResult& r) {
  const auto grads = unscaled_gradients();
  const auto norm = gradient_norm(grads, device_);
  std::vector<torch::Tensor> sums = {sums_.loss, sums_.correct};
  dist::sum_over_ranks(*group_, sums, "step loss");  // loss and accuracy of the global batch
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
  if (plan_.cfg.optimizer.grad_clip > 0 && r.grad_norm > plan_.cfg.optimizer.grad_clip)
    torch::_foreach_mul_(grads, plan_.cfg.optimizer.grad_clip / (r.grad_norm + 1e-6));
  optimizer_->step(schedule_->lr(loop_.step), torch::Tensor());
  optimizer_->zero_grad();
  scaler_.update(true);
}

}  // namespace roformer::train
