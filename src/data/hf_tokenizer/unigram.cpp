// Unigram (tokenizers' models/unigram, encode_optimized): the segmentation of a piece with the
// highest sum of piece scores (Viterbi), a character no piece covers scoring the lowest score less
// 10 as the unknown token, and runs of unknown characters fused into one.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "data/hf_tokenizer/models.h"
#include "data/hf_tokenizer/unicode.h"

namespace roformer::data::hf {

namespace {

constexpr double kUnkPenalty = 10.0;

class Unigram : public Model {
 public:
  explicit Unigram(const core::JsonReader& j) {
    const nlohmann::json& vocab = j.list("vocab");
    for (const nlohmann::json& entry : vocab) {
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
        j.wrong("vocab", entry, "a list of [piece, score] pairs");
      const int32_t id = static_cast<int32_t>(pieces_.size());
      pieces_.push_back(entry[0].get<std::string>());
      scores_.push_back(entry[1].get<double>());
      vocab_.insert(pieces_.back(), id);
      min_score_ = std::min(min_score_, scores_.back());
    }
    finish_vocab();
    // By id the model's pieces are all there (id_to_token), repeated ones included.
    by_id_.assign(pieces_.size(), nullptr);
    for (size_t id = 0; id < pieces_.size(); ++id) by_id_[id] = &pieces_[id];
    if (j.has("unk_id") && !j.at("unk_id").is_null()) {
      unk_id_ = static_cast<int32_t>(j.count("unk_id"));
      if (pieces_.empty() || static_cast<size_t>(unk_id_) >= pieces_.size())
        j.wrong("unk_id", "the id of a piece in \"vocab\"");
    }
    byte_fallback_ = j.boolean("byte_fallback", false);
    for (size_t id = 0; id < pieces_.size(); ++id) add_to_trie(pieces_[id]);
  }

  void tokenize(std::string_view s, std::vector<int32_t>& ids) const override {
    struct Node {
      int32_t id = -1;
      double score = 0;
      int64_t starts_at = -1;
    };
    thread_local std::vector<Node> best;
    best.assign(s.size() + 1, Node{});
    const double unk_score = min_score_ - kUnkPenalty;
    for (size_t start = 0; start < s.size();) {
      const double here = best[start].score;
      const size_t char_len = utf8_length(static_cast<uint8_t>(s[start]));
      bool has_single = false;
      int32_t node = 0;
      for (size_t end = start; end < s.size();) {
        node = child(node, static_cast<uint8_t>(s[end++]));
        if (node < 0) break;
        const int32_t id = terminal_[node];
        if (id < 0) continue;
        Node& target = best[end];
        const double candidate = scores_[id] + here;
        if (target.starts_at < 0 || candidate > target.score) target = {id, candidate, static_cast<int64_t>(start)};
        if (end - start == char_len) has_single = true;
      }
      if (!has_single) {
        Node& target = best[start + char_len];
        const double candidate = unk_score + here;
        if (target.starts_at < 0 || candidate > target.score) {
          if (unk_id_ < 0) throw Error("the Unigram model has no unk_id for a character none of its pieces covers");
          target = {unk_id_, candidate, static_cast<int64_t>(start)};
        }
      }
      start += char_len;
    }
    // Back from the end: the pieces in reverse, runs of unknown characters fused.
    thread_local std::vector<std::pair<size_t, size_t>> spans;  // [start, end) of each piece, reversed
    spans.clear();
    bool in_unk = false;
    for (size_t end = s.size(); end > 0;) {
      const Node& n = best[end];
      const size_t start = static_cast<size_t>(n.starts_at);
      const bool unk = n.id == unk_id_;
      if (unk && in_unk) spans.back().first = start;
      else spans.emplace_back(start, end);
      in_unk = unk;
      end = start;
    }
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      const std::string_view piece = s.substr(it->first, it->second - it->first);
      const int32_t id = vocab_.find(piece);
      if (id >= 0) {
        ids.push_back(id);
        continue;
      }
      if (byte_fallback_ && append_bytes(piece, ids)) continue;
      if (unk_id_ < 0) throw Error("the Unigram model has no unk_id for a character none of its pieces covers");
      ids.push_back(unk_id_);
    }
  }
  std::string unk_token() const override { return unk_id_ >= 0 ? pieces_[unk_id_] : ""; }
  std::string type() const override { return "Unigram"; }

 private:
  // The ids of the byte pieces "<0xNN>" of every byte of `piece`; false (ids untouched) unless all exist.
  bool append_bytes(std::string_view piece, std::vector<int32_t>& ids) const {
    const size_t first = ids.size();
    for (const char b : piece) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned>(static_cast<uint8_t>(b)));
      const int32_t id = vocab_.find(name);
      if (id < 0) {
        ids.resize(first);
        return false;
      }
      ids.push_back(id);
    }
    return true;
  }

  // A byte trie of the pieces: node 0 the root, children_ keyed by (node << 8 | byte).
  int32_t child(int32_t node, uint8_t byte) const {
    const auto it = children_.find((static_cast<uint64_t>(node) << 8) | byte);
    return it == children_.end() ? -1 : it->second;
  }
  void add_to_trie(const std::string& piece) {
    if (terminal_.empty()) terminal_.push_back(-1);
    int32_t node = 0;
    for (const char b : piece) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(b);
      const auto it = children_.find(key);
      if (it != children_.end()) {
        node = it->second;
        continue;
      }
      const int32_t next = static_cast<int32_t>(terminal_.size());
      terminal_.push_back(-1);
      children_.emplace(key, next);
      node = next;
    }
    // tokenizers looks a found piece's string up again: a repeated piece has its last id.
    if (node > 0) terminal_[node] = vocab_.find(piece);
  }

  std::deque<std::string> pieces_;
  std::vector<double> scores_;
  double min_score_ = INFINITY;
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
  std::unordered_map<uint64_t, int32_t> children_;
  std::vector<int32_t> terminal_;  // per trie node: the id of the piece ending there, or -1
};

}  // namespace

std::unique_ptr<Model> make_unigram(const core::JsonReader& j) { return std::make_unique<Unigram>(j); }

}  // namespace roformer::data::hf
