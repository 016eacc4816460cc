// Masked-token evaluation over fixed batches; see evaluate.h.
#include "eval/evaluate.h"

#include <chrono>
#include <cmath>

#include "dist/collectives.h"

namespace roformer::eval {

metrics::EvalRecord evaluate_mlm(model::RoFormerForMaskedLM& model, const std::vector<data::Batch>& batches,
                        const torch::Device& device, config::Precision precision) {
  const auto start = std::chrono::steady_clock::now();
  const bool was_training = model->is_training();
  model->eval();
  torch::NoGradGuard no_grad;
  metrics::EvalRecord r;
  // Sums accumulate on the device in float64 and are read once at the end (no per-batch sync).
  auto opts = torch::TensorOptions().dtype(torch::kFloat64).device(device);
  torch::Tensor loss_sum = torch::zeros({}, opts), correct = torch::zeros({}, opts), correct5 = torch::zeros({}, opts);
  for (const auto& b : batches) {
    if (b.pred_positions.numel() == 0) continue;
    if (!device.is_cpu()) model::check_token_ids(b.input_ids, model->options().model().vocab_size);  // host batch
    auto ids = b.input_ids.to(device, /*non_blocking=*/true);
    auto mask = b.attention_mask.defined() ? b.attention_mask.to(device, true) : torch::Tensor();
    auto pos = b.pred_positions.to(device, true);
    auto labels = b.pred_labels.to(device, true);  // (P,)
    torch::Tensor logits;
    {
      model::AutocastScope autocast(device.type(), precision);
      logits = model->forward_sparse(ids, mask, pos);  // (P, V)
    }
    logits = logits.to(torch::kFloat32);
    // Per-position losses are summed in float64, so the total does not depend on how positions are
    // grouped into batches (a float32 sum per batch would round differently for each batch size).
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone))
                    .to(torch::kFloat64)
                    .sum();
    auto top5 = std::get<1>(logits.topk(std::min<int64_t>(5, logits.size(1)), /*dim=*/1));  // (P, 5)
    correct += top5.select(1, 0).eq(labels).sum().to(torch::kFloat64);
    correct5 += top5.eq(labels.unsqueeze(1)).any(1).sum().to(torch::kFloat64);
    r.n_predicted += b.pred_positions.numel();
    r.n_sequences += b.input_ids.size(0);
    r.n_tokens += b.num_tokens;
  }
  if (r.n_predicted > 0) {
    const double n = static_cast<double>(r.n_predicted);
    r.loss = loss_sum.item<double>() / n;
    r.accuracy = correct.item<double>() / n;
    r.top5_accuracy = correct5.item<double>() / n;
    r.perplexity = std::exp(r.loss);
  }
  if (was_training) model->train();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

metrics::EvalRecord sum_over_ranks(dist::ProcessGroup& group, const metrics::EvalRecord& mine) {
  if (group.world_size() == 1) return mine;
  const double n = static_cast<double>(mine.n_predicted);
  const auto v = dist::sum_over_ranks(group,
                                      {mine.loss * n, mine.accuracy * n, mine.top5_accuracy * n, n,
                                       static_cast<double>(mine.n_sequences), static_cast<double>(mine.n_tokens)},
                                      "evaluation");
  metrics::EvalRecord r = mine;
  r.n_predicted = std::llround(v[3]);
  r.n_sequences = std::llround(v[4]);
  r.n_tokens = std::llround(v[5]);
  if (r.n_predicted > 0) {
    r.loss = v[0] / v[3];
    r.accuracy = std::round(v[1]) / v[3];  // the correct counts are integers
    r.top5_accuracy = std::round(v[2]) / v[3];
    r.perplexity = std::exp(r.loss);
  }
  return r;
}

}  // namespace roformer::eval
