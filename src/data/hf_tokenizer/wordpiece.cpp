// WordPiece (tokenizers' models/wordpiece): greedy longest-match-first within a word, the
// continuation pieces carrying the prefix ("##"); a word with a part no piece covers, or longer
// than max_input_chars_per_word characters, is the unknown token whole.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/hf_tokenizer/models.h"
#include "data/hf_tokenizer/unicode.h"

namespace roformer::data::hf {

namespace {

class WordPiece : public Model {
 public:
  explicit WordPiece(const core::JsonReader& j)
      : unk_(j.string("unk_token", "[UNK]")),
        prefix_(j.string("continuing_subword_prefix", "##")),
        max_chars_(j.count("max_input_chars_per_word", 100)) {
    read_vocab_object(j);
  }

  void tokenize(std::string_view word, std::vector<int32_t>& ids) const override {
    size_t chars = 0;
    for (size_t i = 0; i < word.size() && chars <= max_chars_; ++chars) i += utf8_length(static_cast<uint8_t>(word[i]));
    if (chars > max_chars_) {
      ids.push_back(unk_id());
      return;
    }
    const size_t first = ids.size();
    thread_local std::string candidate;
    for (size_t start = 0; start < word.size();) {
      size_t end = word.size();
      int32_t found = -1;
      while (start < end) {
        const std::string_view part = word.substr(start, end - start);
        if (start == 0) {
          found = vocab_.find(part);
        } else {
          candidate.assign(prefix_).append(part);
          found = vocab_.find(candidate);
        }
        if (found >= 0) break;
        end -= last_char_length(part);
      }
      if (found < 0) {  // a part no piece covers: the word is unknown
        ids.resize(first);
        ids.push_back(unk_id());
        return;
      }
      ids.push_back(found);
      start = end;
    }
  }
  std::string unk_token() const override { return unk_; }
  std::string continuing_prefix() const override { return prefix_; }
  std::string type() const override { return "WordPiece"; }

 private:
  int32_t unk_id() const {
    const int32_t id = vocab_.find(unk_);
    if (id < 0) throw Error("the WordPiece vocabulary has no unknown token \"" + unk_ + "\" for a word it cannot cover");
    return id;
  }
  std::string unk_, prefix_;
  size_t max_chars_;
};

}  // namespace

std::unique_ptr<Model> make_wordpiece(const core::JsonReader& j) { return std::make_unique<WordPiece>(j); }

}  // namespace roformer::data::hf
