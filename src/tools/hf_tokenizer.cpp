// SentencePiece ModelProto -> Hugging Face tokenizer.json (see hf_tokenizer.h for the mapping).
//
// The Debian libsentencepiece-dev package installs no sentencepiece_model.pb.h, so the fields of
// the ModelProto used here (pieces, trainer_spec, normalizer_spec) are read from the model file's
// protobuf wire format by a small reader; field numbers are those of sentencepiece_model.proto.
#include "tools/hf_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/file.h"
#include "data/tokenizer.h"
#include "train/checkpoint_store.h"

namespace roformer::tools {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kMetaspace = "\xE2\x96\x81";  // "▁", SentencePiece's whitespace mark

// The parts of sentencepiece::ModelProto the conversion needs.
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
  std::string precompiled_charsmap;            // NormalizerSpec (2)
  bool add_dummy_prefix = true;                // NormalizerSpec (3)
  bool remove_extra_whitespaces = true;        // NormalizerSpec (4)
  bool escape_whitespaces = true;              // NormalizerSpec (5)
};

// Protobuf wire format: a sequence of (tag = field << 3 | wire type, value).
class WireReader {
 public:
  WireReader(std::string_view bytes, const std::string& file) : bytes_(bytes), file_(file) {}
  bool done() const { return pos_ >= bytes_.size(); }
  // (field number, wire type) of the next field.
  std::pair<uint64_t, int> tag() {
    const uint64_t key = varint();
    return {key >> 3, static_cast<int>(key & 7)};
  }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const auto byte = static_cast<uint8_t>(bytes_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
    fail();
  }
  std::string_view length_delimited() {
    const uint64_t n = varint();
    need(n);
    const auto out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  float fixed32_float() {
    need(4);
    uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits |= static_cast<uint32_t>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
    pos_ += 4;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1: advance(8); return;
      case 2: length_delimited(); return;
      case 5: advance(4); return;
      default: fail();
    }
  }

 private:
  void need(uint64_t n) const {
    if (n > bytes_.size() - pos_) fail();
  }
  void advance(uint64_t n) {
    need(n);
    pos_ += n;
  }
  [[noreturn]] void fail() const {
    throw Error(fmt::format("'{}' is not a valid SentencePiece model (its protobuf is truncated or malformed); "
                            "train a tokenizer with `roformer tokenizer train`", file_));
  }
  std::string_view bytes_;
  size_t pos_ = 0;
  const std::string& file_;
};

SpmModel parse_spm_model(const std::string& path) {
  const std::string bytes = core::read_file(path, "the tokenizer");
  SpmModel m;
  WireReader model(bytes, path);
  while (!model.done()) {
    const auto [field, wire] = model.tag();
    if (field == 1 && wire == 2) {  // SentencePiece
      WireReader r(model.length_delimited(), path);
      SpmModel::Piece p;
      while (!r.done()) {
        const auto [f, w] = r.tag();
        if (f == 1 && w == 2) p.piece = std::string(r.length_delimited());
        else if (f == 2 && w == 5) p.score = r.fixed32_float();
        else if (f == 3 && w == 0) p.type = static_cast<int>(r.varint());
        else r.skip(w);
      }
      m.pieces.push_back(std::move(p));
    } else if (field == 2 && wire == 2) {  // TrainerSpec
      WireReader r(model.length_delimited(), path);
      while (!r.done()) {
        const auto [f, w] = r.tag();
        if (f == 3 && w == 0) m.model_type = static_cast<int>(r.varint());
        else if (f == 24 && w == 0) m.treat_whitespace_as_suffix = r.varint() != 0;
        else if (f == 35 && w == 0) m.byte_fallback = r.varint() != 0;
        else if (f == 40 && w == 0) m.unk_id = static_cast<int>(r.varint());
        else if (f == 45 && w == 2) m.unk_piece = std::string(r.length_delimited());
        else r.skip(w);
      }
    } else if (field == 3 && wire == 2) {  // NormalizerSpec
      WireReader r(model.length_delimited(), path);
      while (!r.done()) {
        const auto [f, w] = r.tag();
        if (f == 2 && w == 2) m.precompiled_charsmap = std::string(r.length_delimited());
        else if (f == 3 && w == 0) m.add_dummy_prefix = r.varint() != 0;
        else if (f == 4 && w == 0) m.remove_extra_whitespaces = r.varint() != 0;
        else if (f == 5 && w == 0) m.escape_whitespaces = r.varint() != 0;
        else r.skip(w);
      }
    } else {
      model.skip(wire);
    }
  }
  return m;
}

std::string base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 2]));
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

size_t utf8_length(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// BPE merges from the vocabulary, as transformers' generate_merges(vocab, vocab_scores) derives
// them: every split of a piece at a character boundary into two pieces of the vocabulary is a
// merge with the piece's score; merges are ranked by (score, left length, right length), highest
// first, ties in vocabulary order. SentencePiece's BPE merges the adjacent pair whose result has the
// highest score, so ranking merges by that score reproduces its encoding. Pieces that text never
// produces (control, unknown, unused, byte) take part in no merge.
std::vector<std::pair<std::string, std::string>> bpe_merges(const SpmModel& m) {
  std::unordered_map<std::string, size_t> id_of;
  for (size_t id = 0; id < m.pieces.size(); ++id)
    if (m.pieces[id].type == SpmModel::kNormal || m.pieces[id].type == SpmModel::kUserDefined)
      id_of.emplace(m.pieces[id].piece, id);
  struct Merge {
    std::string left, right;
    float score;
    size_t left_chars, right_chars;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < m.pieces.size(); ++id) {
    const auto& p = m.pieces[id];
    if (!id_of.count(p.piece)) continue;
    std::vector<Merge> local;
    for (size_t cut = 1; cut < p.piece.size(); ++cut) {
      if ((p.piece[cut] & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      std::string left = p.piece.substr(0, cut), right = p.piece.substr(cut);
      if (!id_of.count(left) || !id_of.count(right)) continue;
      const size_t lc = utf8_length(left), rc = utf8_length(right);
      local.push_back({std::move(left), std::move(right), p.score, lc, rc});
    }
    std::stable_sort(local.begin(), local.end(), [&](const Merge& a, const Merge& b) {
      return std::make_pair(id_of.at(a.left), id_of.at(a.right)) < std::make_pair(id_of.at(b.left), id_of.at(b.right));
    });
    for (auto& x : local) merges.push_back(std::move(x));
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::make_tuple(a.score, a.left_chars, a.right_chars) > std::make_tuple(b.score, b.left_chars, b.right_chars);
  });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (auto& x : merges) out.emplace_back(std::move(x.left), std::move(x.right));
  return out;
}

json model_json(const SpmModel& m, const std::string& path) {
  if (m.model_type == 1) {
    json vocab = json::array();
    for (const auto& p : m.pieces) vocab.push_back({p.piece, static_cast<double>(p.score)});
    return {{"type", "Unigram"}, {"unk_id", m.unk_id}, {"vocab", vocab}, {"byte_fallback", false}};
  }
  if (m.model_type == 2) {
    json vocab = json::object();
    for (size_t id = 0; id < m.pieces.size(); ++id) vocab[m.pieces[id].piece] = id;
    json merges = json::array();
    for (const auto& [l, r] : bpe_merges(m)) merges.push_back({l, r});
    return {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", m.unk_piece}, {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr}, {"fuse_unk", true}, {"byte_fallback", false}, {"ignore_merges", false},
            {"vocab", vocab}, {"merges", merges}};
  }
  throw Error(fmt::format("tokenizer '{}' is a SentencePiece {} model; the Hugging Face export converts unigram and "
                          "BPE models only (tokenizer.model_type)", path, m.model_type == 3 ? "word" : "char"));
}

json normalizer_json(const SpmModel& m) {
  json steps = json::array();
  if (!m.precompiled_charsmap.empty())
    steps.push_back({{"type", "Precompiled"}, {"precompiled_charsmap", base64(m.precompiled_charsmap)}});
  if (m.remove_extra_whitespaces) {
    steps.push_back({{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}});
    steps.push_back({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", kMetaspace}});
  }
  return {{"type", "Sequence"}, {"normalizers", steps}};
}

json special_token(const std::string& piece, int64_t type_id) {
  return {{"SpecialToken", {{"id", piece}, {"type_id", type_id}}}};
}
json sequence(const std::string& id, int64_t type_id) { return {{"Sequence", {{"id", id}, {"type_id", type_id}}}}; }

}  // namespace

json hf_tokenizer_json(const std::string& spm_model_path, const HfTokenizerOptions& options) {
  using data::Tokenizer;
  const auto tokenizer = Tokenizer::load(spm_model_path);  // checks the fixed special ids
  const SpmModel m = parse_spm_model(spm_model_path);
  if (static_cast<int64_t>(m.pieces.size()) != tokenizer.vocab_size())
    throw Error(fmt::format("tokenizer '{}': read {} pieces from the model file, SentencePiece has {}; the file is "
                            "damaged", spm_model_path, m.pieces.size(), tokenizer.vocab_size()));
  if (m.byte_fallback || m.treat_whitespace_as_suffix || !m.escape_whitespaces)
    throw Error(fmt::format("tokenizer '{}' uses {}, which the Hugging Face export does not reproduce; export a model "
                            "whose tokenizer was trained by `roformer tokenizer train`", spm_model_path,
                            m.byte_fallback ? "byte fallback" : m.treat_whitespace_as_suffix
                                                                  ? "whitespace as a suffix"
                                                                  : "unescaped whitespace"));
  json added = json::array();
  for (size_t id = 0; id < m.pieces.size(); ++id) {
    const int type = m.pieces[id].type;
    if (type != SpmModel::kControl && type != SpmModel::kUserDefined) continue;
    added.push_back({{"id", id}, {"content", m.pieces[id].piece}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", type == SpmModel::kControl}});
  }
  const std::string cls = tokenizer.id_to_piece(Tokenizer::kCls), sep = tokenizer.id_to_piece(Tokenizer::kSep);
  const int64_t b_type = options.type_vocab_size >= 2 ? 1 : 0;
  const json post = {
      {"type", "TemplateProcessing"},
      {"single", {special_token(cls, 0), sequence("A", 0), special_token(sep, 0)}},
      {"pair", {special_token(cls, 0), sequence("A", 0), special_token(sep, 0), sequence("B", b_type),
                special_token(sep, b_type)}},
      {"special_tokens", {{cls, {{"id", cls}, {"ids", {Tokenizer::kCls}}, {"tokens", {cls}}}},
                          {sep, {{"id", sep}, {"ids", {Tokenizer::kSep}}, {"tokens", {sep}}}}}}};
  const std::string prepend = m.add_dummy_prefix ? "always" : "never";
  const json metaspace = {{"type", "Metaspace"}, {"replacement", kMetaspace}, {"prepend_scheme", prepend},
                          {"split", true}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", normalizer_json(m)},
          {"pre_tokenizer", metaspace},
          {"post_processor", post},
          {"decoder", metaspace},
          {"model", model_json(m, spm_model_path)}};
}

void write_hf_tokenizer(const json& tokenizer, const std::string& out_dir, const HfTokenizerOptions& options) {
  // The pieces of ids 0-4 are fixed in every roformer tokenizer (data/tokenizer.h).
  const json specials = {{"pad_token", "[PAD]"}, {"unk_token", "[UNK]"}, {"cls_token", "[CLS]"},
                         {"sep_token", "[SEP]"}, {"mask_token", "[MASK]"}};
  json config = specials;
  // PreTrainedTokenizerFast reads tokenizer.json as is; naming it keeps AutoTokenizer from picking
  // the class of config.json's model_type (RoFormerTokenizer, a Chinese tokenizer needing rjieba).
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  config["model_max_length"] = options.model_max_length;
  config["padding_side"] = "right";
  config["clean_up_tokenization_spaces"] = false;
  const fs::path dir(out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create '{}': {}", out_dir, ec.message()));
  core::write_file_atomic((dir / "tokenizer.json").string(), tokenizer.dump(2) + "\n");
  core::write_file_atomic((dir / "tokenizer_config.json").string(), config.dump(2) + "\n");
  core::write_file_atomic((dir / "special_tokens_map.json").string(), specials.dump(2) + "\n");
}

}  // namespace roformer::tools
