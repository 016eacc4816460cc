// Masked-token evaluation: top-1 / top-5 accuracy, loss and perplexity at every predicted position
// of a fixed set of batches (their masks come from a fixed seed, so figures compare across runs).
// Runs the sparse head, batch by batch: never materializes (N, T, V) logits. Below both the run
// (train/, which evaluates every eval.every steps) and `roformer eval` (tools/); the figures are a
// metrics::EvalRecord.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/loader.h"
#include "metrics/records.h"
#include "model/autocast.h"
#include "model/roformer.h"

namespace roformer::dist {
class ProcessGroup;
}

namespace roformer::eval {

// precision: autocast on the device (bf16, fp16) or none (fp32). Leaves the model in the mode it found.
metrics::EvalRecord evaluate_mlm(model::RoFormerForMaskedLM& model, const std::vector<data::Batch>& batches,
                        const torch::Device& device, config::Precision precision);

// Data parallel: each rank evaluated its share (dist::rank_share) of the fixed validation set; the
// sums over the ranks give the figures of the whole set (as one process computes them, up to
// float64 rounding of the loss sum). A world of one returns `mine` as it is. seconds: this rank's.
metrics::EvalRecord sum_over_ranks(dist::ProcessGroup& group, const metrics::EvalRecord& mine);

}  // namespace roformer::eval
