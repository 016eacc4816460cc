#include "train/optimizer.h"

#include <utility>

#include "checkpoint/checkpointer.h"  // get_rng_states / set_rng_states

namespace roformer::train {

namespace {

std::vector<torch::Tensor> concat(std::vector<torch::Tensor> a, const std::vector<torch::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

model::RoFormerForMaskedLM make_bf16_compute_model(const model::RoFormerForMaskedLM& weights) {
  // Building a model draws its random initialization: the generators are put back afterwards, so
  // dropout and everything after draws exactly what it would without the copy.
  const auto rng = checkpoint::get_rng_states();
  model::RoFormerForMaskedLM compute(weights->options());
  checkpoint::set_rng_states(rng);
  const auto device = weights->parameters().front().device();
  compute->to(device);
  // Parameters only: the rotary table (a buffer) stays fp32, as autocast keeps it, so positions are
  // rotated with the same angles at every length.
  torch::NoGradGuard no_grad;
  for (auto& p : compute->parameters()) p.set_data(p.data().to(torch::kBFloat16));
  compute->pack_qkv();  // the set_data above moved q, k, v apart
  compute->train(weights->is_training());
  return compute;
}

AdamW::AdamW(model::RoFormerForMaskedLM weights, model::RoFormerForMaskedLM compute,
             const config::OptimizerConfig& o)
    : fused_(o.fused) {
  auto group_options = [&](double weight_decay) {
    auto opts = std::make_unique<torch::optim::AdamWOptions>(o.lr);
    opts->betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(weight_decay).amsgrad(false);
    return opts;
  };
  auto decay = weights->decay_parameters(o.decay_embeddings);
  auto no_decay = weights->no_decay_parameters(o.decay_embeddings);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, group_options(o.weight_decay));
  groups.emplace_back(no_decay, group_options(0.0));
  torch::optim::AdamWOptions defaults(o.lr);
  defaults.betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(0.0);
  optimizer_ = std::make_unique<torch::optim::AdamW>(groups, defaults);
  params_ = concat(decay, no_decay);
  if (fused_ && !params_.empty() && params_.front().is_cuda())
    lr_ = torch::full({}, o.lr, torch::TensorOptions().dtype(torch::kFloat32).device(params_.front().device()));
  if (compute.ptr() != weights.ptr()) {
    // The same architecture lists its parameters in the same order.
    compute_params_ = concat(compute->decay_parameters(o.decay_embeddings), compute->no_decay_parameters(o.decay_embeddings));
    TORCH_CHECK(compute_params_.size() == params_.size(), "compute model has ", compute_params_.size(),
                " parameters, the weights ", params_.size());
    for (size_t i = 0; i < params_.size(); ++i)
      TORCH_CHECK(compute_params_[i].sizes() == params_[i].sizes(), "parameter ", i, " differs in shape");
    loaded();
  }
}

void AdamW::accumulate_gradients() {
  if (!master_weights()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> sums, adds;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& g = compute_params_[i].mutable_grad();
    if (!g.defined()) continue;  // no gradient in this micro-batch: the master's stays as it is
    auto& master = params_[i].mutable_grad();
    if (master.defined()) {
      sums.push_back(master);
      adds.push_back(g);
    } else {
      master = g.to(torch::kFloat32);
    }
  }
  if (!sums.empty()) torch::_foreach_add_(sums, adds);  // fp32 += bf16, in fp32
  for (auto& p : compute_params_) p.mutable_grad() = torch::Tensor();
}

std::vector<torch::Tensor> AdamW::gradients() const {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params_)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

void AdamW::step(double lr, const torch::Tensor& found_inf) {
  set_lr(lr);
  update(found_inf);
}

void AdamW::set_lr(double lr) {
  for (auto& group : optimizer_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  if (lr_.defined()) lr_.fill_(lr);
}

void AdamW::update(const torch::Tensor& found_inf) {
  if (fused_)
    fused_step(found_inf);
  else
    optimizer_->step();
  write_back();  // a skipped update (found_inf) left the masters, so the copy changes nothing
}

void AdamW::write_back() {
  if (!master_weights()) return;
  torch::NoGradGuard no_grad;
  torch::_foreach_copy_(compute_params_, params_);  // fp32 -> bf16, round to nearest even
}

// at::_fused_adamw_ once per parameter group (the groups differ in weight decay) on the state
// tensors of optimizer_. The kernel wants float step counts on the device: they mirror the host
// counts of the states (one device tensor per parameter, built from the host count the first
// time, e.g. after a resume).
void AdamW::fused_step(const torch::Tensor& found_inf) {
  for (auto& group : optimizer_->param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = optimizer_->state()[p.unsafeGetTensorImpl()];
      if (!slot) {  // what torch::optim::AdamW does on a parameter's first step
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& state = static_cast<torch::optim::AdamWParamState&>(*slot);
      if (state.exp_avg().device() != p.device()) {  // loaded from a checkpoint onto the CPU
        state.exp_avg(state.exp_avg().to(p.device()));
        state.exp_avg_sq(state.exp_avg_sq().to(p.device()));
      }
      // The count lives on the device from here on (a skipped update must not count): the host
      // count that optimizer.pt saves is brought in line by sync_step_counts.
      auto& device_step = device_steps_[p.unsafeGetTensorImpl()];
      if (!device_step.defined())
        device_step = torch::full({}, static_cast<double>(state.step()),
                                  torch::TensorOptions().dtype(torch::kFloat32).device(p.device()));
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(state.exp_avg());
      exp_avg_sqs.push_back(state.exp_avg_sq());
      steps.push_back(device_step);
    }
    if (params.empty()) continue;
    torch::_foreach_add_(steps, 1);
    const auto [beta1, beta2] = o.betas();
    const auto inf = found_inf.defined() ? std::optional<torch::Tensor>(found_inf) : std::nullopt;
    auto adamw = [&](const auto& lr) {  // the learning rate as a device tensor (lr_) or a number
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr, beta1, beta2,
                        o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false, /*grad_scale=*/std::nullopt, inf);
    };
    if (lr_.defined())
      adamw(lr_);
    else
      adamw(o.lr());
    if (found_inf.defined()) torch::_foreach_sub_(steps, std::vector<torch::Tensor>(steps.size(), found_inf));
  }
}

void AdamW::zero_grad() {
  for (auto& p : compute_params_) p.mutable_grad() = torch::Tensor();
  if (!keep_gradients_) {
    optimizer_->zero_grad(true);
    return;
  }
  const auto grads = gradients();
  if (!grads.empty()) torch::_foreach_zero_(grads);
}

void AdamW::keep_gradients() { keep_gradients_ = true; }

void AdamW::loaded() {
  device_steps_.clear();
  write_back();
}

void AdamW::sync_step_counts() {
  if (device_steps_.empty()) return;
  std::vector<void*> keys;
  std::vector<torch::Tensor> counts;
  for (const auto& [key, count] : device_steps_) {
    keys.push_back(key);
    counts.push_back(count);
  }
  const auto host = torch::stack(counts).to(torch::kCPU, torch::kFloat64).contiguous();
  const double* value = host.data_ptr<double>();
  for (size_t i = 0; i < keys.size(); ++i)
    static_cast<torch::optim::AdamWParamState&>(*optimizer_->state().at(keys[i])).step(std::llround(value[i]));
}

int64_t AdamW::step_count() {
  sync_step_counts();
  if (params_.empty() || !optimizer_->state().count(params_.front().unsafeGetTensorImpl())) return 0;
  return static_cast<torch::optim::AdamWParamState&>(*optimizer_->state().at(params_.front().unsafeGetTensorImpl()))
      .step();
}

}  // namespace roformer::train
