// Checking `roformer export --format hf` directories with Python transformers, for the
// integration tests: the logits reference that tests/python/check_hf_export.py compares against.
#pragma once

#include <string>

#include <torch/torch.h>

#include "core/safetensors.h"
#include "test_util.h"
#include "checkpoint/loader.h"

namespace roformer::test {

// Runs check_hf_export.py on `export_dir`: Hugging Face's class for it (RoFormerForMaskedLM,
// BertForMaskedLM for learned absolute positions, DebertaV2ForMaskedLM for disentangled attention)
// must load it with no missing or unexpected keys and give the checkpoint's logits on random ids
// with padding (written to `reference`, a .safetensors path), max |difference| <= `tolerance`.
inline CommandResult check_export_logits(const std::string& checkpoint, const std::string& export_dir,
                                         const std::string& reference, double tolerance = 1e-4) {
  auto ck = roformer::checkpoint::load_checkpoint(checkpoint, torch::Device(torch::kCPU));
  torch::manual_seed(0);
  auto ids = torch::randint(5, ck.tokenizer->vocab_size(), {3, 20}, torch::kInt64);  // (B, T)
  ids.index_put_({torch::indexing::Slice(), 0}, 2);
  auto mask = torch::ones({3, 20}, torch::kInt64);
  mask.index_put_({1, torch::indexing::Slice(12, torch::indexing::None)}, 0);
  ids.index_put_({1, torch::indexing::Slice(12, torch::indexing::None)}, 0);
  torch::Tensor logits;  // (B, T, V)
  {
    torch::NoGradGuard g;
    logits = ck.model->forward(ids, mask);
  }
  roformer::core::save_safetensors(reference, {{"input_ids", ids}, {"attention_mask", mask}, {"logits", logits.contiguous()}});
  return run_command(python() + " " + source_dir() + "/tests/python/check_hf_export.py " + export_dir + " " + reference + " " +
                     std::to_string(tolerance));
}

}  // namespace roformer::test
