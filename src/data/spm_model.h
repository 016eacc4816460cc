// The fields of a SentencePiece model file (a serialized sentencepiece::ModelProto) that roformer
// reads itself, from the protobuf wire format: the Debian libsentencepiece-dev package installs no
// sentencepiece_model.pb.h, and whether a file is a model at all must not depend on how a given
// SentencePiece version words its load errors. Field numbers are those of sentencepiece_model.proto.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace roformer::data {

// The parts of sentencepiece::ModelProto that the tokenizer check and the Hugging Face export need.
struct SpmModel {
  enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  struct Piece {
    std::string piece;
    float score = 0;
    int type = kNormal;
  };
  std::vector<Piece> pieces;                   // ModelProto.pieces (1)
  int model_type = 1;                          // TrainerSpec.model_type (3): 1 unigram, 2 bpe, 3 word, 4 char
  bool treat_whitespace_as_suffix = false;     // TrainerSpec (24)
  bool byte_fallback = false;                  // TrainerSpec (35)
  int unk_id = 0;                              // TrainerSpec (40)
  std::string unk_piece = "<unk>";             // TrainerSpec (45)
  std::string normalizer_name;                 // NormalizerSpec.name (1): nmt_nfkc, nfkc, identity, ...
  std::string precompiled_charsmap;            // NormalizerSpec (2)
  bool add_dummy_prefix = true;                // NormalizerSpec (3)
  bool remove_extra_whitespaces = true;        // NormalizerSpec (4)
  bool escape_whitespaces = true;              // NormalizerSpec (5)
};

// The model held in `bytes` (a .model file's content), or nullopt when they are not one: not
// well-formed protobuf (a text, JSON or safetensors file fails at its first bytes), or a message
// without pieces (an empty file).
std::optional<SpmModel> parse_spm_model(std::string_view bytes);

// The rules of NormalizerSpec.precompiled_charsmap, SentencePiece's normalization table (for its
// default nmt_nfkc: NFKC, plus control characters deleted and odd whitespace made " "). The table
// is [u32 trie size][a darts-clone double-array trie over the UTF-8 bytes of each rule's key][the
// replacements, each NUL-terminated]; SentencePiece replaces the longest key that starts at each
// position. Calls visit(key, replacement) for every rule, keys in byte order; returns false when
// the table is malformed (visit may have seen some rules by then).
bool for_each_charsmap_rule(std::string_view charsmap,
                            const std::function<void(std::string_view key, std::string_view replacement)>& visit);

}  // namespace roformer::data
