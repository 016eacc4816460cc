#include "train/loss_scaler.h"

#include <algorithm>

#include <torch/torch.h>

namespace roformer::train {

void LossScaler::unscale(const std::vector<torch::Tensor>& grads) const {
  if (!dynamic_ || grads.empty()) return;
  torch::NoGradGuard no_grad;
  torch::_foreach_mul_(grads, 1.0 / scale_);
}

bool LossScaler::update(bool finite) {
  if (!dynamic_) return false;
  if (!finite) {  // an overflow: skip the step, halve the scale
    scale_ = std::max(1.0, scale_ * 0.5);
    good_steps_ = 0;
    return true;
  }
  if (++good_steps_ % kGrowthInterval == 0) scale_ *= 2.0;
  return false;
}

}  // namespace roformer::train
