// The names our parameters carry in checkpoints and state dicts (Hugging Face RoFormer's, as
// RoFormerForMaskedLMImpl::hf_named_parameters gives them) that code outside the model looks for by
// name: the word and token-type tables, the MLM head and its tied aliases. Spelled once, here; the
// families of src/hf/ map them to their own names.
#pragma once

namespace roformer::model::names {

inline constexpr const char* kWordEmbeddings = "roformer.embeddings.word_embeddings.weight";
inline constexpr const char* kTokenTypeEmbeddings = "roformer.embeddings.token_type_embeddings.weight";
inline constexpr const char* kHead = "cls.predictions.";  // every tensor of the MLM head begins so
inline constexpr const char* kHeadBias = "cls.predictions.bias";
// The decoder: aliases, the weight of kWordEmbeddings (tied) and the bias of kHeadBias.
inline constexpr const char* kDecoder = "cls.predictions.decoder.";
inline constexpr const char* kDecoderWeight = "cls.predictions.decoder.weight";
inline constexpr const char* kDecoderBias = "cls.predictions.decoder.bias";

}  // namespace roformer::model::names
