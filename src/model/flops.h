// Training FLOPs of one MLM step, for throughput / MFU reporting.
#pragma once

#include <cstdint>

#include "model/options.h"

namespace roformer::model {

// 3 x the forward matmul FLOPs (forward + backward ~ 1 + 2), 2 m n k per (m x k)(k x n) matmul:
//   projection  2 B T E H                       (only when E != H)
//   per layer   QKV 3 * 2 B T H^2 + output 2 B T H^2 + FFN 2 * 2 B T H I (glu: 3 * 2 B T H I)
//               softmax attention: QK^T 2 B T^2 H + AV 2 B T^2 H (local layers too: the kernel
//               computes every score and masks those outside the window)
//               linear attention:  K^T V 2 B T H D + Q (K^T V) 2 B T H D
//               the position scheme's own (PositionScheme::flops_per_layer): disentangled, per
//               relative term (c2p, p2c), the R used rows of the relative table projected
//               2 R H^2, scored against every query (key) 2 B T R H
//   layers      num_layers, plus the scheme's extra passes (the enhanced mask decoder: 1, as the
//               last layer's ordinary pass is skipped and it runs twice as the decoder)
//   head        2 P H E + 2 P E V               (P = n_pred predicted positions)
// Embedding lookups, LayerNorm, softmax, the rotary products and the gathers are not counted.
double mlm_train_flops_per_step(const RoFormerOptions& options, int64_t batch, int64_t seq_len, int64_t n_pred);

// Model FLOPs utilization (PaLM, appendix B): the model FLOPs of a step over its wall time, against
// the peak of every device that ran it: flops / seconds / (peak_tflops 1e12 devices). The one
// formula of `roformer bench` and the training run (its log, metrics.jsonl and summary).
double model_flops_utilization(double flops_per_step, double seconds_per_step, double peak_tflops, int devices);

}  // namespace roformer::model
