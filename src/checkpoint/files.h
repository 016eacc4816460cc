// The files of a checkpoint directory (RUN/checkpoints/step_N), named once for the trainer, the
// checkpointer and the tools that read checkpoints (eval, export, inspect, --init-from).
#pragma once

#include <string>

#include "data/tokenizer.h"

namespace roformer::checkpoint::files {

inline constexpr const char* kModel = "model.safetensors";      // weights under Hugging Face names
inline constexpr const char* kOptimizer = "optimizer.pt";       // AdamW state (torch::save)
inline constexpr const char* kTrainerState = "trainer_state.json";  // checkpoint/trainer_state.h
inline constexpr const char* kConfig = "config.yaml";           // the resolved config of the run
// The tokenizer, in the files data::Tokenizer::files() names: tokenizer.model (SentencePiece) or
// tokenizer.json with special_tokens_map.json (Hugging Face); data::Tokenizer::load(checkpoint dir) reads it.
inline constexpr const char* kTokenizerFiles[] = {data::kTokenizerModelFile, data::kTokenizerJsonFile};  // one of them
inline constexpr const char* kMetrics = "metrics.jsonl";        // the run's metrics up to this step
inline constexpr const char* kManifest = "manifest.json";       // sizes and checksums, written last

// Rank r's generator states (dropout): rng.pt for rank 0, rng_rank<r>.pt for the others.
inline std::string rng(int rank) { return rank == 0 ? "rng.pt" : "rng_rank" + std::to_string(rank) + ".pt"; }

}  // namespace roformer::checkpoint::files
