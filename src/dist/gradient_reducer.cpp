// Bucketed, overlapped gradient all-reduce (see gradient_reducer.h).
#include "dist/gradient_reducer.h"

#include <torch/torch.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <functional>
#include <unordered_map>

#include "core/error.h"

namespace roformer::dist {

namespace {

// Forwards AccumulateGrad's post hook (which runs once .grad holds this backward's contribution) to
// the reducer.
class ReadyHook : public torch::autograd::PostAccumulateGradHook {
 public:
  ReadyHook(std::function<void()> on_ready) : on_ready_(std::move(on_ready)) {}
  void operator()(const torch::autograd::Variable& /*param*/) override { on_ready_(); }

 private:
  std::function<void()> on_ready_;
};

}  // namespace

GradientReducer::GradientReducer(ProcessGroup& group, std::vector<torch::Tensor> parameters,
                                 const GradientReducerOptions& options)
    : group_(group), params_(std::move(parameters)) {
  if (!(options.bucket_mb > 0)) throw Error("the gradient bucket size (bucket_mb) must be positive");
  const double cap_bytes = options.bucket_mb * 1024.0 * 1024.0;
  slots_.resize(params_.size());
  // A tensor listed twice would own two bucket slots but only one hook slot.
  std::unordered_map<const void*, size_t> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto [it, fresh] = seen.emplace(params_[i].unsafeGetTensorImpl(), i);
    TORCH_CHECK(fresh, "parameter ", i, " is the same tensor as parameter ", it->second, ": list each once");
  }
  // Reverse registration order, a new bucket when the dtype changes or the capacity is reached.
  for (int64_t i = static_cast<int64_t>(params_.size()) - 1; i >= 0; --i) {
    const auto& p = params_[static_cast<size_t>(i)];
    TORCH_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), "parameter ", i, " is not a leaf that requires grad");
    TORCH_CHECK(p.device() == group_.device(), "parameter ", i, " lives on ", p.device(), ", the process group on ",
                group_.device());
    const double bytes = static_cast<double>(p.numel() * p.element_size());
    bool fresh = buckets_.empty();
    if (!fresh) {
      const Bucket& last = buckets_.back();
      const auto& first = params_[static_cast<size_t>(last.params.front())];
      fresh = first.scalar_type() != p.scalar_type() ||
              static_cast<double>(last.numel * first.element_size()) + bytes > cap_bytes;
    }
    if (fresh) buckets_.emplace_back();
    Bucket& b = buckets_.back();
    slots_[static_cast<size_t>(i)] = {static_cast<int64_t>(buckets_.size()) - 1, static_cast<int64_t>(b.params.size()), false};
    b.params.push_back(i);
    b.offsets.push_back(b.numel);
    b.numel += p.numel();
  }
  for (auto& b : buckets_)
    b.flat = torch::zeros({b.numel}, params_[static_cast<size_t>(b.params.back())].options().requires_grad(false));
  reset();
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto index = static_cast<int64_t>(i);
    torch::autograd::impl::set_post_acc_grad_hooks(
        params_[i], std::make_unique<ReadyHook>([this, index] { on_grad_ready(index); }));
  }
}

std::unique_ptr<GradientReducer> make_gradient_reducer(ProcessGroup& group, std::vector<torch::Tensor> parameters,
                                                       const GradientReducerOptions& options) {
  if (!group.communicates()) return nullptr;
  return std::make_unique<GradientReducer>(group, std::move(parameters), options);
}

GradientReducer::~GradientReducer() {
  for (auto& p : params_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

std::vector<std::vector<int64_t>> GradientReducer::bucket_parameters() const {
  std::vector<std::vector<int64_t>> out;
  for (const auto& b : buckets_) out.push_back(b.params);
  return out;
}

void GradientReducer::set_sync(bool sync) {
  std::lock_guard<std::mutex> lock(mu_);
  sync_ = sync;
}

void GradientReducer::reset() {
  for (auto& b : buckets_) {
    b.pending = static_cast<int64_t>(b.params.size());
    b.work.reset();
  }
  for (auto& s : slots_) s.ready = false;
  next_start_ = 0;
  started_now_in_backward_ = 0;
}

void GradientReducer::copy_in(int64_t param) {
  const auto& p = params_[static_cast<size_t>(param)];
  const Slot& s = slots_[static_cast<size_t>(param)];
  Bucket& b = buckets_[static_cast<size_t>(s.bucket)];
  auto slice = b.flat.narrow(0, b.offsets[static_cast<size_t>(s.index)], p.numel()).view(p.sizes());
  const auto& grad = p.grad();
  if (grad.defined())
    slice.copy_(grad);
  else
    slice.zero_();
}

void GradientReducer::on_grad_ready(int64_t param) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!sync_) return;  // accumulating: gradients stay local until the synchronizing backward
  Slot& s = slots_[static_cast<size_t>(param)];
  if (s.ready)
    throw Error("gradient of parameter " + std::to_string(param) +
                " arrived twice in one synchronizing step: call set_sync(false) before the backward of every "
                "micro-batch but the last, and finish() after the last");
  s.ready = true;
  copy_in(param);
  Bucket& b = buckets_[static_cast<size_t>(s.bucket)];
  if (--b.pending == 0) start_ready_buckets(/*in_backward=*/true);
}

void GradientReducer::start_ready_buckets(bool in_backward) {
  while (next_start_ < num_buckets() && buckets_[static_cast<size_t>(next_start_)].pending == 0) {
    Bucket& b = buckets_[static_cast<size_t>(next_start_)];
    b.work = group_.all_reduce_sum_async(b.flat);
    if (in_backward) ++started_now_in_backward_;
    ++next_start_;
  }
}

void GradientReducer::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!sync_) return;
  torch::NoGradGuard no_grad;
  // Parameters whose hook did not fire in this backward (unused in the last micro-batch) still
  // contribute what .grad holds; then everything left starts, in bucket order.
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.ready) continue;
    s.ready = true;
    copy_in(static_cast<int64_t>(i));
    --buckets_[static_cast<size_t>(s.bucket)].pending;
  }
  start_ready_buckets(/*in_backward=*/false);
  started_in_backward_ = started_now_in_backward_;
  try {
    for (size_t k = 0; k < buckets_.size(); ++k)
      group_.wait(buckets_[k].work, "gradient all_reduce (bucket " + std::to_string(k) + " of " +
                                        std::to_string(buckets_.size()) + ")");
  } catch (...) {
    reset();
    throw;
  }
  for (auto& b : buckets_) {
    for (size_t j = 0; j < b.params.size(); ++j) {
      auto& p = params_[static_cast<size_t>(b.params[j])];
      auto sum = b.flat.narrow(0, b.offsets[j], p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(sum);
      else
        p.mutable_grad() = sum.clone();
    }
  }
  reset();
}

}  // namespace roformer::dist
