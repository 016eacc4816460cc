// `roformer export --format hf`: a directory that transformers.RoFormerForMaskedLM.from_pretrained
// (BertForMaskedLM for a model with model.position: absolute, DebertaV2ForMaskedLM for
// disentangled; AutoModelForMaskedLM for any) loads with no missing or unexpected keys: config.json
// (RoFormerConfig / BertConfig / DebertaV2Config), model.safetensors
// (Hugging Face parameter names), the SentencePiece model (spiece.model, which `train --init-from`
// takes back), its Hugging Face form for AutoTokenizer and pipeline("fill-mask") (tokenizer.json,
// tokenizer_config.json, special_tokens_map.json: tools/hf_tokenizer.h) and a model card (README.md).
#pragma once

#include <string>

namespace roformer::tools {

// Throws roformer::Error for a model Hugging Face's RoFormer, BERT or DeBERTa-v2 cannot represent
// (pre-LN, linear attention, no positions, a rotary base other than 10000, absolute or disentangled
// positions with a factorized embedding, the enhanced mask decoder) instead of writing a file that
// loads but computes something else. A non-empty out_dir
// is refused unless `force`; a directory holding a checkpoint (or inside a run's checkpoints/) is
// always refused, so an export never damages training state.
void export_hf(const std::string& checkpoint, const std::string& out_dir, bool force = false);

}  // namespace roformer::tools
