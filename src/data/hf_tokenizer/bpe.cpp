// BPE (tokenizers' models/bpe): a piece starts as its characters (continuation prefix, end-of-word
// suffix, byte fallback and the unknown token as the model says), then the adjacent pair of lowest
// merge rank is merged, leftmost first, until no pair of the merges is left. Dropout is refused
// (roformer encodes deterministically); merged words are cached per thread.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "core/error.h"
#include "data/hf_tokenizer/models.h"
#include "data/hf_tokenizer/unicode.h"

namespace roformer::data::hf {

namespace {

struct MergeRule {
  uint32_t rank;
  int32_t result;
};

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

// A word's symbols during merging (tokenizers' Word): a doubly linked list over a vector.
struct Symbol {
  int32_t id;
  int32_t prev, next;
  size_t len;  // bytes of the piece; 0 once merged into its left neighbour
};

struct Candidate {
  uint32_t rank;
  int32_t pos;
  int32_t result;
  // Lowest rank first, then leftmost (the top of std::push_heap's max-heap).
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

std::atomic<uint64_t> next_model_serial{1};

class Bpe : public Model {
 public:
  explicit Bpe(const core::JsonReader& j) : serial_(next_model_serial++) {
    if (j.has("dropout") && !j.at("dropout").is_null() && j.number("dropout") != 0.0)
      j.wrong("dropout", "null or 0 (BPE dropout samples other ids at every encode; roformer encodes each text once)");
    const auto optional_string = [&](const std::string& key) {
      return j.has(key) && !j.at(key).is_null() ? j.string(key) : std::string();
    };
    unk_ = optional_string("unk_token");
    prefix_ = optional_string("continuing_subword_prefix");
    suffix_ = optional_string("end_of_word_suffix");
    fuse_unk_ = j.boolean("fuse_unk", false);
    byte_fallback_ = j.boolean("byte_fallback", false);
    ignore_merges_ = j.boolean("ignore_merges", false);
    read_vocab_object(j);
    read_merges(j);
    if (byte_fallback_)
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        byte_ids_[b] = vocab_.find(name);
      }
  }

  void tokenize(std::string_view piece, std::vector<int32_t>& ids) const override {
    if (ignore_merges_)
      if (const int32_t id = vocab_.find(piece); id >= 0) {
        ids.push_back(id);
        return;
      }
    thread_local Cache cache;
    if (cache.serial != serial_) {
      cache.words.clear();
      cache.serial = serial_;
    }
    const auto hit = cache.words.find(std::string(piece));
    if (hit != cache.words.end()) {
      ids.insert(ids.end(), hit->second.begin(), hit->second.end());
      return;
    }
    const size_t first = ids.size();
    merge_word(piece, ids);
    if (cache.words.size() >= kCacheWords) cache.words.clear();
    if (piece.size() < kCacheMaxBytes) cache.words.emplace(std::string(piece), std::vector<int32_t>(ids.begin() + first, ids.end()));
  }
  std::string unk_token() const override { return unk_; }
  std::string continuing_prefix() const override { return prefix_; }
  std::string type() const override { return "BPE"; }

 private:
  static constexpr size_t kCacheWords = 1 << 17;  // per thread; cleared when full
  static constexpr size_t kCacheMaxBytes = 256;   // tokenizers' MAX_LENGTH
  struct Cache {
    uint64_t serial = 0;
    std::unordered_map<std::string, std::vector<int32_t>> words;
  };

  // merges: ["a b", ...] (the older form) or [["a", "b"], ...]; the merged token is a + b without
  // b's continuation prefix. A later merge of the same pair replaces an earlier one (as the map in
  // tokenizers does).
  void read_merges(const core::JsonReader& j) {
    const nlohmann::json& merges = j.list("merges");
    uint32_t rank = 0;
    for (const nlohmann::json& m : merges) {
      std::string a, b;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
          j.wrong("merges", m, "pairs \"a b\" of two tokens separated by one space");
        a = s.substr(0, space);
        b = s.substr(space + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        j.wrong("merges", m, "pairs [\"a\", \"b\"] of tokens");
      }
      const int32_t a_id = vocab_.find(a), b_id = vocab_.find(b);
      std::string merged = a + (b.compare(0, prefix_.size(), prefix_) == 0 ? b.substr(prefix_.size()) : b);
      const int32_t merged_id = vocab_.find(merged);
      const std::string* missing = a_id < 0 ? &a : b_id < 0 ? &b : merged_id < 0 ? &merged : nullptr;
      if (missing)
        j.wrong("merges", m, "merges of tokens in the vocabulary (\"" + *missing + "\" is not in \"vocab\")");
      merges_[pair_key(a_id, b_id)] = {rank++, merged_id};
    }
  }

  // tokenizers' BPE::merge_word: the symbols of the piece, then merge_all.
  void merge_word(std::string_view w, std::vector<int32_t>& ids) const {
    thread_local std::vector<Symbol> symbols;
    thread_local std::string unit;
    symbols.clear();
    auto add = [&](int32_t id, size_t len) {
      const int32_t n = static_cast<int32_t>(symbols.size());
      if (n > 0) symbols.back().next = n;
      symbols.push_back({id, n - 1, -1, len});
    };
    int32_t unk_id = -1;
    size_t unk_len = 0;  // pending unknown characters (fused or not)
    for (size_t i = 0; i < w.size();) {
      const size_t at = i;
      i += utf8_length(static_cast<uint8_t>(w[i]));
      const std::string_view c = w.substr(at, i - at);
      unit.clear();
      if (at > 0) unit += prefix_;
      unit.append(c);
      if (i >= w.size()) unit += suffix_;
      const int32_t id = vocab_.find(unit);
      if (id >= 0) {
        if (unk_len > 0) add(unk_id, unk_len), unk_len = 0;
        add(id, c.size());
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (const char b : unit) all &= byte_ids_[static_cast<uint8_t>(b)] >= 0;
        if (all) {
          for (const char b : unit) add(byte_ids_[static_cast<uint8_t>(b)], 1);
          continue;
        }
      }
      if (unk_.empty()) continue;  // no unknown token: the character is dropped
      const int32_t unk = vocab_.find(unk_);
      if (unk < 0) throw Error("the BPE vocabulary has no unknown token \"" + unk_ + "\" for a character it lacks");
      if (unk_len > 0 && fuse_unk_) {
        unk_len += c.size();
        continue;
      }
      if (unk_len > 0) add(unk_id, unk_len);
      unk_id = unk;
      unk_len = c.size();
    }
    if (unk_len > 0) add(unk_id, unk_len);
    merge_all(symbols);
    for (const Symbol& s : symbols)
      if (s.len > 0) ids.push_back(s.id);
  }

  const MergeRule* rule(int32_t a, int32_t b) const {
    const auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  // tokenizers' Word::merge_all without dropout.
  void merge_all(std::vector<Symbol>& symbols) const {
    thread_local std::vector<Candidate> queue;  // a heap: the lowest rank, then the leftmost, on top
    queue.clear();
    const auto push = [&](const Candidate& c) {
      queue.push_back(c);
      std::push_heap(queue.begin(), queue.end());
    };
    for (size_t k = 0; k + 1 < symbols.size(); ++k)
      if (const MergeRule* r = rule(symbols[k].id, symbols[k + 1].id)) push({r->rank, static_cast<int32_t>(k), r->result});
    while (!queue.empty()) {
      std::pop_heap(queue.begin(), queue.end());
      const Candidate top = queue.back();
      queue.pop_back();
      Symbol& s = symbols[top.pos];
      if (s.len == 0 || s.next < 0) continue;
      const Symbol right = symbols[s.next];
      const MergeRule* current = rule(s.id, right.id);
      if (!current || current->result != top.result) continue;  // an expired candidate
      const int32_t right_pos = s.next;
      s.id = top.result;
      s.len += right.len;
      s.next = right.next;
      symbols[right_pos].len = 0;
      if (right.next >= 0 && static_cast<size_t>(right.next) < symbols.size()) symbols[right.next].prev = top.pos;
      if (s.prev >= 0)
        if (const MergeRule* r = rule(symbols[s.prev].id, s.id)) push({r->rank, s.prev, r->result});
      if (s.next >= 0 && static_cast<size_t>(s.next) < symbols.size())
        if (const MergeRule* r = rule(s.id, symbols[s.next].id)) push({r->rank, top.pos, r->result});
    }
  }

  uint64_t serial_;
  std::string unk_, prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::unordered_map<uint64_t, MergeRule> merges_;
  int32_t byte_ids_[256] = {};
};

}  // namespace

std::unique_ptr<Model> make_bpe(const core::JsonReader& j) { return std::make_unique<Bpe>(j); }

}  // namespace roformer::data::hf
