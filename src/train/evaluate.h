// Masked-token evaluation: top-1 / top-5 accuracy, loss and perplexity at every predicted position
// of a fixed set of batches (their masks come from a fixed seed, so figures compare across runs).
// Runs the sparse head, batch by batch: never materializes (N, T, V) logits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/loader.h"
#include "model/autocast.h"
#include "model/roformer.h"

namespace roformer::dist {
class ProcessGroup;
}

namespace roformer::train {

struct EvalResult {
  double loss = 0;            // mean cross entropy over predicted positions (nats)
  double accuracy = 0;        // top-1
  double top5_accuracy = 0;
  double perplexity = 0;      // exp(loss)
  int64_t n_predicted = 0;
  int64_t n_sequences = 0;
  int64_t n_tokens = 0;       // non-padding input tokens
  double seconds = 0;
};

// precision: autocast on the device (bf16, fp16) or none (fp32). Leaves the model in the mode it found.
EvalResult evaluate_mlm(model::RoFormerForMaskedLM& model, const std::vector<data::Batch>& batches,
                        const torch::Device& device, config::Precision precision);

// Data parallel: each rank evaluated its share (dist::rank_share) of the fixed validation set; the
// sums over the ranks give the figures of the whole set (as one process computes them, up to
// float64 rounding of the loss sum). A world of one returns `mine` as it is. seconds: this rank's.
EvalResult sum_over_ranks(dist::ProcessGroup& group, const EvalResult& mine);

}  // namespace roformer::train
