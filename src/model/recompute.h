// Gradient checkpointing of one encoder layer (LibTorch C++ has no torch.utils.checkpoint).
//
// Forward runs the layer without building a graph and saves only its inputs; backward re-runs the
// layer with grad enabled on detached copies of the inputs and back-propagates through it
// (re-entrant, like torch.utils.checkpoint(use_reentrant=True)): the gradients of the inputs that
// carry one (x, the enhanced mask decoder's queries, the position scheme's trainable inputs)
// are returned, those of the layer's parameters accumulate in their .grad. Dropout is reproduced
// exactly: the CPU generator state (and the CUDA one of the input's device) is saved before the
// forward and restored around the recomputation, then the caller's state is put back. So is
// autocast: the forward's autocast state (bf16/fp16 or off) is saved and re-entered for the
// recomputation, which backward otherwise runs outside the caller's autocast region (as
// torch.utils.checkpoint does). Limitations, as PyTorch's re-entrant variant: gradients reach the
// layer's parameters through their .grad (use loss.backward(), not torch::autograd::grad on
// parameters), and the input must require grad (always true after the trainable embeddings).
#pragma once

#include <torch/types.h>

#include <memory>

namespace roformer::model {

class RoFormerLayerImpl;
struct LayerInputs;

// Same result as layer->forward(x, inputs, queries), with activations recomputed in backward.
torch::Tensor checkpointed_layer_forward(const std::shared_ptr<RoFormerLayerImpl>& layer, const torch::Tensor& x,
                                         const LayerInputs& inputs, const torch::Tensor& queries);

}  // namespace roformer::model
