// SentencePiece ModelProto fields from the protobuf wire format; see spm_model.h.
#include "data/spm_model.h"

#include <cstdint>
#include <cstring>
#include <utility>

namespace roformer::data {

namespace {

struct Malformed {};  // thrown inside this file only: the bytes are not well-formed protobuf

// Protobuf wire format: a sequence of (tag = field << 3 | wire type, value).
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return pos_ >= bytes_.size(); }
  // (field number, wire type) of the next field; field 0 does not exist in protobuf.
  std::pair<uint64_t, int> tag() {
    const uint64_t key = varint();
    if ((key >> 3) == 0) throw Malformed{};
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
    throw Malformed{};
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
  // Skips a field of a wire type this reader does not interpret; groups (3, 4) and the unused
  // types 6 and 7 appear in no ModelProto.
  void skip(int wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1: advance(8); return;
      case 2: length_delimited(); return;
      case 5: advance(4); return;
      default: throw Malformed{};
    }
  }

 private:
  void need(uint64_t n) const {
    if (n > bytes_.size() - pos_) throw Malformed{};
  }
  void advance(uint64_t n) {
    need(n);
    pos_ += n;
  }
  std::string_view bytes_;
  size_t pos_ = 0;
};

SpmModel::Piece read_piece(std::string_view bytes) {
  WireReader r(bytes);
  SpmModel::Piece p;
  while (!r.done()) {
    const auto [f, w] = r.tag();
    if (f == 1 && w == 2) p.piece = std::string(r.length_delimited());
    else if (f == 2 && w == 5) p.score = r.fixed32_float();
    else if (f == 3 && w == 0) p.type = static_cast<int>(r.varint());
    else r.skip(w);
  }
  return p;
}

void read_trainer_spec(std::string_view bytes, SpmModel& m) {
  WireReader r(bytes);
  while (!r.done()) {
    const auto [f, w] = r.tag();
    if (f == 3 && w == 0) m.model_type = static_cast<int>(r.varint());
    else if (f == 24 && w == 0) m.treat_whitespace_as_suffix = r.varint() != 0;
    else if (f == 35 && w == 0) m.byte_fallback = r.varint() != 0;
    else if (f == 40 && w == 0) m.unk_id = static_cast<int>(r.varint());
    else if (f == 45 && w == 2) m.unk_piece = std::string(r.length_delimited());
    else r.skip(w);
  }
}

void read_normalizer_spec(std::string_view bytes, SpmModel& m) {
  WireReader r(bytes);
  while (!r.done()) {
    const auto [f, w] = r.tag();
    if (f == 1 && w == 2) m.normalizer_name = std::string(r.length_delimited());
    else if (f == 2 && w == 2) m.precompiled_charsmap = std::string(r.length_delimited());
    else if (f == 3 && w == 0) m.add_dummy_prefix = r.varint() != 0;
    else if (f == 4 && w == 0) m.remove_extra_whitespaces = r.varint() != 0;
    else if (f == 5 && w == 0) m.escape_whitespaces = r.varint() != 0;
    else r.skip(w);
  }
}

}  // namespace

std::optional<SpmModel> parse_spm_model(std::string_view bytes) {
  SpmModel m;
  try {
    WireReader model(bytes);
    while (!model.done()) {
      const auto [field, wire] = model.tag();
      if (field == 1 && wire == 2) m.pieces.push_back(read_piece(model.length_delimited()));
      else if (field == 2 && wire == 2) read_trainer_spec(model.length_delimited(), m);
      else if (field == 3 && wire == 2) read_normalizer_spec(model.length_delimited(), m);
      else model.skip(wire);
    }
  } catch (const Malformed&) {
    return std::nullopt;
  }
  if (m.pieces.empty()) return std::nullopt;
  return m;
}

// darts-clone's unit (darts.h, DoubleArrayUnit): bit 8 says a key ends below this node, the low 8
// bits (with bit 31) are the label checked on the way in, bits 10-31 the offset to the children
// (shifted by 8 more when bit 9 is set); a leaf unit's low 31 bits are its value, here the offset of
// the rule's replacement.
bool for_each_charsmap_rule(std::string_view charsmap,
                            const std::function<void(std::string_view key, std::string_view replacement)>& visit) {
  if (charsmap.size() < 4) return false;
  uint32_t trie_bytes = 0;
  for (int i = 0; i < 4; ++i) trie_bytes |= static_cast<uint32_t>(static_cast<uint8_t>(charsmap[i])) << (8 * i);
  if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > charsmap.size() - 4) return false;
  std::vector<uint32_t> units(trie_bytes / 4);
  std::memcpy(units.data(), charsmap.data() + 4, trie_bytes);  // little-endian, as x86 and ARM are
  const std::string_view replacements = charsmap.substr(4 + trie_bytes);
  const auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  const auto has_leaf = [](uint32_t u) { return ((u >> 8) & 1) != 0; };
  const auto label = [](uint32_t u) { return u & ((1u << 31) | 0xFF); };

  std::string key;
  bool ok = true;
  // Depth first from `node` (the index its children are found from): each child byte c in turn.
  constexpr size_t kMaxKeyBytes = 256;  // SentencePiece's keys are a few characters; deeper is a cycle
  std::function<void(size_t)> walk = [&](size_t node) {
    if (key.size() >= kMaxKeyBytes) {
      ok = false;
      return;
    }
    for (uint32_t c = 1; c < 256 && ok; ++c) {
      const size_t child = node ^ c;
      if (child >= units.size() || label(units[child]) != c) continue;
      const size_t next = child ^ offset(units[child]);
      if (next >= units.size()) {
        ok = false;
        return;
      }
      key.push_back(static_cast<char>(c));
      if (has_leaf(units[child])) {
        const size_t at = units[next] & ((1u << 31) - 1);
        const size_t end = at < replacements.size() ? replacements.find('\0', at) : std::string_view::npos;
        if (end == std::string_view::npos) {
          ok = false;
          return;
        }
        visit(key, replacements.substr(at, end - at));
      }
      walk(next);
      key.pop_back();
    }
  };
  walk(offset(units[0]));
  return ok;
}

}  // namespace roformer::data
