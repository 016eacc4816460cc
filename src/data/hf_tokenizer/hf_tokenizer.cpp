// A tokenizer.json backend: the file read into its components, the encode pipeline, decoding and
// the special roles (hf_tokenizer.h).
#include "data/hf_tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file.h"
#include "core/json_read.h"
#include "data/hf_tokenizer/added_tokens.h"
#include "data/hf_tokenizer/components.h"
#include "data/hf_tokenizer/models.h"

namespace roformer::data::hf {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<core::JsonReader> optional_object(const core::JsonReader& parent, const std::string& key) {
  if (!parent.has(key) || parent.at(key).is_null()) return std::nullopt;
  return parent.object(key);
}

size_t one_of(const core::JsonReader& parent, const std::string& key, const std::vector<std::string>& names) {
  const std::string value = parent.string(key);
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == value) return i;
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  parent.wrong(key, list + " (what roformer implements)");
}

namespace {

// The role keys of tokenizer_config.json and special_tokens_map.json, in SpecialTokens' order.
constexpr const char* kRoleKeys[] = {"pad_token", "unk_token", "cls_token", "sep_token", "mask_token"};

int32_t& role(SpecialTokens& s, size_t k) {
  int32_t* roles[] = {&s.pad, &s.unk, &s.cls, &s.sep, &s.mask};
  return *roles[k];
}
int32_t role(const SpecialTokens& s, size_t k) { return role(const_cast<SpecialTokens&>(s), k); }

class HfTokenizer : public TokenizerBackend {
 public:
  explicit HfTokenizer(const std::string& path) : path_(path) {
    bytes_ = core::read_file(path, "tokenizer");
    const std::string advice = "give a tokenizer.json saved by Hugging Face tokenizers (Tokenizer.save, or a model "
                               "directory's save_pretrained)";
    const json file = core::parse_json(bytes_, "tokenizer " + path, advice);
    const core::JsonReader j(file, path, kUnsupportedAdvice);
    if (j.has("version") && j.string("version") != "1.0") j.wrong("version", "\"1.0\"");
    model_ = parse_model(j.object("model"));
    if (auto n = optional_object(j, "normalizer")) normalizer_ = parse_normalizer(*n);
    if (auto p = optional_object(j, "pre_tokenizer")) pre_tokenizer_ = parse_pre_tokenizer(*p);
    if (auto p = optional_object(j, "post_processor")) post_processor_ = parse_post_processor(*p);
    if (auto d = optional_object(j, "decoder")) decoder_ = parse_decoder(*d);
    added_ = std::make_unique<AddedVocabulary>(j, j.has("added_tokens") ? j.at("added_tokens") : json::array(), *model_,
                                               normalizer_.get());
    vocab_size_ = model_->id_end();
    for (const auto& [id, token] : added_->tokens()) vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{id} + 1);
    resolve_roles();
    word_mark_ = model_->continuing_prefix();
    continuation_ = !word_mark_.empty();
    if (!continuation_ && pre_tokenizer_) word_mark_ = pre_tokenizer_->word_start_mark();
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    if (text.empty()) return ids;
    thread_local std::vector<Piece> pieces;
    pieces.clear();
    pieces.push_back(Piece{std::string(text), -1, true, true});
    added_->split_raw(pieces);
    if (normalizer_)
      for (Piece& p : pieces)
        if (p.token < 0) normalizer_->normalize(p);
    added_->split_normalized(pieces);  // also drops pieces the normalizer emptied
    if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
    for (const Piece& p : pieces) {
      if (p.token >= 0) ids.push_back(p.token);
      else if (!p.text.empty()) model_->tokenize(p.text, ids);
    }
    return ids;
  }
  std::vector<int32_t> add_special_tokens(const std::vector<int32_t>& ids) const override {
    return post_processor_ ? post_processor_->single(ids) : ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::vector<std::string> tokens;
    for (const int32_t id : ids) {
      if (const AddedToken* t = added_->token(id)) {
        if (!t->special) tokens.push_back(added_->decoded_form(id));
      } else if (const std::string* s = model_->id_to_token(id)) {
        tokens.push_back(*s);
      }
    }
    std::string out;
    if (!decoder_) {
      for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
      return out;
    }
    decoder_->decode_chain(tokens);
    for (const std::string& t : tokens) out += t;
    return out;
  }
  std::string id_to_piece(int32_t id) const override {
    if (const AddedToken* t = added_->token(id)) return t->content;
    const std::string* s = model_->id_to_token(id);
    return s ? *s : std::string();
  }
  int64_t vocab_size() const override { return vocab_size_; }
  SpecialTokens special_tokens() const override { return special_; }
  std::vector<int32_t> other_special_ids() const override {
    std::vector<int32_t> out;
    for (const auto& [id, token] : added_->tokens())
      if (token.special) out.push_back(id);
    for (int32_t id = 0; id < vocab_size_; ++id)  // ids without a token: never produced
      if (!added_->token(id) && !model_->id_to_token(id)) out.push_back(id);
    return out;
  }
  bool is_word_start(int32_t id) const override {
    if (added_->token(id)) return true;  // an added token stands alone
    const std::string* s = model_->id_to_token(id);
    if (!s) return false;
    if (word_mark_.empty()) return true;  // no mark: every piece is a word (whole-word masking masks pieces)
    const bool marked = s->compare(0, word_mark_.size(), word_mark_) == 0;
    return continuation_ ? !marked : marked;
  }
  std::string description() const override {
    std::string d = "tokenizer.json " + model_->type();
    if (word_mark_ == "\xC4\xA0") d += " (byte-level)";
    return d;
  }
  std::vector<std::pair<std::string, std::string>> files() const override {
    json map = json::object();
    for (size_t k = 0; k < 5; ++k) {
      const int32_t id = role(special_, k);
      if (id >= 0) map[kRoleKeys[k]] = id_to_piece(id);
    }
    return {{kTokenizerJsonFile, bytes_}, {kSpecialTokensMapFile, map.dump(2) + "\n"}};
  }

 private:
  // The id of a token named by a role, -1 when the tokenizer has no such token.
  int32_t id_of(const std::string& content) const {
    const int32_t added = added_->id(content);
    return added >= 0 ? added : model_->token_to_id(content);
  }

  // Roles named in a side file (tokenizer_config.json, special_tokens_map.json): "mask_token":
  // "[MASK]" or {"content": "[MASK]", ...}.
  void roles_from(const std::string& name, SpecialTokens& s, std::vector<bool>& named) const {
    const fs::path side = fs::path(path_).parent_path() / name;
    std::error_code ec;
    if (!fs::is_regular_file(side, ec)) return;
    const std::string where = side.string();
    const std::string advice = "fix it or remove it (the tokenizer.json's own special tokens are then used)";
    const json file = core::parse_json(core::read_file(where, name), where, advice);
    const core::JsonReader j(file, where, advice);
    for (size_t k = 0; k < 5; ++k) {
      if (named[k] || !j.has(kRoleKeys[k]) || j.at(kRoleKeys[k]).is_null()) continue;
      const json& v = j.at(kRoleKeys[k]);
      std::string content;
      if (v.is_string()) content = v.get<std::string>();
      else if (v.is_object() && v.contains("content") && v["content"].is_string()) content = v["content"].get<std::string>();
      else j.wrong(kRoleKeys[k], "a token (\"[MASK]\" or {\"content\": \"[MASK]\", ...})");
      const int32_t id = id_of(content);
      if (id < 0)
        j.wrong(kRoleKeys[k], "a token of " + path_ + " (\"" + content + "\" is neither an added token nor in the "
                              "model's vocabulary)");
      role(s, k) = id;
      named[k] = true;
    }
  }

  void resolve_roles() {
    std::vector<bool> named(5, false);
    roles_from(kTokenizerConfigFile, special_, named);
    roles_from(kSpecialTokensMapFile, special_, named);
    if (post_processor_) {
      const auto [cls, sep] = post_processor_->single_frame();
      if (!named[2] && cls >= 0) special_.cls = cls, named[2] = true;
      if (!named[3] && sep >= 0) special_.sep = sep, named[3] = true;
    }
    if (!named[1] && !model_->unk_token().empty()) {
      const int32_t id = id_of(model_->unk_token());
      if (id >= 0) special_.unk = id, named[1] = true;
    }
    const std::vector<std::vector<std::string>> usual = {
        {"[PAD]", "<pad>", "<|padding|>"}, {"[UNK]", "<unk>"}, {"[CLS]", "<s>"}, {"[SEP]", "</s>"}, {"[MASK]", "<mask>"}};
    for (size_t k = 0; k < 5; ++k)
      for (const std::string& content : usual[k]) {
        if (named[k]) break;
        const int32_t id = id_of(content);
        if (id >= 0) role(special_, k) = id, named[k] = true;
      }
    for (size_t k = 0; k < 5; ++k)
      if (role(special_, k) >= vocab_size_)
        throw Error(fmt::format("tokenizer {}: the {} id {} is beyond its vocabulary of {} ids; fix the file", path_,
                                kRoleKeys[k], role(special_, k), vocab_size_));
  }

  std::string path_, bytes_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<AddedVocabulary> added_;
  int64_t vocab_size_ = 0;
  SpecialTokens special_;
  std::string word_mark_;     // the mark of word starts ("Ġ", "▁") or of continuations ("##")
  bool continuation_ = false;  // word_mark_ marks continuations
};

}  // namespace

std::shared_ptr<const TokenizerBackend> load_hf_tokenizer(const std::string& path) {
  return std::make_shared<HfTokenizer>(path);
}

}  // namespace roformer::data::hf
