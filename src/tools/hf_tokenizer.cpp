// SentencePiece ModelProto -> Hugging Face tokenizer.json (see hf_tokenizer.h for the mapping).
// The ModelProto fields used here (pieces, trainer_spec, normalizer_spec) come from data/spm_model.
#include "tools/hf_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/file.h"
#include "data/spm_model.h"
#include "data/tokenizer.h"
#include "checkpoint/store.h"

namespace roformer::tools {
namespace fs = std::filesystem;
using data::SpmModel;
using nlohmann::json;

namespace {

const char* const kMetaspace = "\xE2\x96\x81";  // "▁", SentencePiece's whitespace mark

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

// The code points of `s`, which is valid UTF-8 (the table's keys are: SentencePiece builds them
// from code points).
std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    const size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t cp = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
    for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// An Oniguruma character class (the regex engine of the tokenizers library) holding `cps`, as
// ranges: "[\x{a0}\x{aa}-\x{ac}...]".
std::string char_class(const std::set<char32_t>& cps) {
  std::string out = "[";
  for (auto it = cps.begin(); it != cps.end();) {
    const char32_t first = *it;
    char32_t last = first;
    for (++it; it != cps.end() && *it == last + 1; ++it) last = *it;
    out += fmt::format("\\x{{{:x}}}", static_cast<uint32_t>(first));
    if (last != first) out += fmt::format("-\\x{{{:x}}}", static_cast<uint32_t>(last));
  }
  return out + "]";
}

// Hugging Face's Precompiled normalizer applies SentencePiece's table per grapheme cluster: a
// cluster under 6 bytes whose leading characters match a rule becomes that rule's replacement whole,
// the rest of the cluster dropped, and a longer cluster is mapped character by character
// (tokenizers issues 2116 and 2334). SentencePiece replaces the longest key at each position and
// goes on after it. So a no-break space or a superscript two followed by a zero-width joiner lost
// the joiner, and a decomposed letter inside a long cluster stayed decomposed.
//
// A cluster break makes the two agree: a Replace before Precompiled inserts `marker`, a C0 control
// the table deletes (a control always ends a cluster), after every character that has a rule of its
// own and begins no longer rule; after one that does begin longer rules (ª, and ª + U+0300 -> à), only
// where the next character continues none of them. There SentencePiece's match ends with that
// character, so the cluster now ends where the match does, and Precompiled deletes the marker. What
// stays different: such a character followed by a character that continues one of its rules
// (ª + U+0300 is "à" to SentencePiece, "a" to Hugging Face).
struct ClusterBreak {
  std::string pattern;  // where to insert: "(?<=[...])|(?<=[...])(?![...])"
  std::string marker;
};

// nullopt when the table is malformed or deletes no control character.
std::optional<ClusterBreak> cluster_break(std::string_view charsmap) {
  std::set<char32_t> single;                       // characters with a rule of their own
  std::set<char32_t> deleted_controls;             // C0/C1 controls whose rule deletes them
  std::map<char32_t, std::set<char32_t>> follows;  // first character of a longer key -> its second ones
  const bool ok = data::for_each_charsmap_rule(charsmap, [&](std::string_view key, std::string_view replacement) {
    const auto cps = code_points(key);
    if (cps.size() == 1) {
      single.insert(cps[0]);
      if (replacement.empty() && (cps[0] < 0x20 || (cps[0] >= 0x7F && cps[0] < 0xA0))) deleted_controls.insert(cps[0]);
    } else if (cps.size() > 1) {
      follows[cps[0]].insert(cps[1]);
    }
  });
  if (!ok || deleted_controls.empty()) return std::nullopt;
  std::set<char32_t> ends, begins, continuations;  // rules that end a match / begin longer ones; what continues those
  for (const char32_t c : single) {
    const auto it = follows.find(c);
    if (it == follows.end()) {
      ends.insert(c);
    } else {
      begins.insert(c);
      continuations.insert(it->second.begin(), it->second.end());
    }
  }
  std::string pattern = "(?<=" + char_class(ends) + ")";
  if (!begins.empty()) pattern += "|(?<=" + char_class(begins) + ")(?!" + char_class(continuations) + ")";
  std::string marker;
  const char32_t m = *deleted_controls.begin();
  marker += static_cast<char>(m < 0x80 ? m : 0xC0 | (m >> 6));
  if (m >= 0x80) marker += static_cast<char>(0x80 | (m & 0x3F));
  return ClusterBreak{pattern, marker};
}

json replace_json(const std::string& regex, const std::string& content) {
  return {{"type", "Replace"}, {"pattern", {{"Regex", regex}}}, {"content", content}};
}

// SentencePiece's normalization (normalizer.cc): the table, then with remove_extra_whitespaces
// leading and trailing spaces dropped and runs of spaces made one. Leading ones need no step (the
// Metaspace pre-tokenizer prepends "▁" only to text that does not start with one).
json normalizer_json(const SpmModel& m) {
  json steps = json::array();
  if (!m.precompiled_charsmap.empty()) {
    // An NFKC table gives a text and its NFC form the same result (NFKC(x) = NFKC(NFC(x))); composed
    // first, a decomposed letter is one character that no cluster can cut off (see ClusterBreak).
    if (m.normalizer_name.find("nfkc") != std::string::npos) steps.push_back({{"type", "NFC"}});
    if (const auto brk = cluster_break(m.precompiled_charsmap)) steps.push_back(replace_json(brk->pattern, brk->marker));
    steps.push_back({{"type", "Precompiled"}, {"precompiled_charsmap", base64(m.precompiled_charsmap)}});
  }
  if (m.remove_extra_whitespaces) {
    // Trailing spaces only: a Strip would also drop what Rust counts as whitespace and the table
    // keeps (U+0085 NEXT LINE, which SentencePiece encodes as [UNK]).
    steps.push_back(replace_json(" +\\z", ""));
    steps.push_back(replace_json(" {2,}", kMetaspace));
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
  const data::SpecialTokens special = data::SpecialTokens::sentencepiece();
  const std::optional<SpmModel> parsed = data::parse_spm_model(core::read_file(spm_model_path, "tokenizer model"));
  if (!parsed)  // Tokenizer::load accepted it: the file changed in between
    throw Error(fmt::format("tokenizer '{}' changed while it was read; export again", spm_model_path));
  const SpmModel& m = *parsed;
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
  const std::string cls = tokenizer.id_to_piece(special.cls), sep = tokenizer.id_to_piece(special.sep);
  const int64_t b_type = options.type_vocab_size >= 2 ? 1 : 0;
  const json post = {
      {"type", "TemplateProcessing"},
      {"single", {special_token(cls, 0), sequence("A", 0), special_token(sep, 0)}},
      {"pair", {special_token(cls, 0), sequence("A", 0), special_token(sep, 0), sequence("B", b_type),
                special_token(sep, b_type)}},
      {"special_tokens", {{cls, {{"id", cls}, {"ids", {special.cls}}, {"tokens", {cls}}}},
                          {sep, {{"id", sep}, {"ids", {special.sep}}, {"tokens", {sep}}}}}}};
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

void write_hf_tokenizer(const std::string& tokenizer_json, const data::Tokenizer& tokenizer, const std::string& out_dir,
                        const HfTokenizerOptions& options) {
  // Each role as its added token in tokenizer.json (with its lstrip, normalized, ... flags, which a
  // bare string would reset in transformers), else by its text.
  const json file = json::parse(tokenizer_json);
  const data::SpecialTokens& s = tokenizer.special_tokens();
  json specials = json::object();
  for (const auto& [key, id] : {std::pair<const char*, int32_t>{"pad_token", s.pad}, {"unk_token", s.unk},
                                {"cls_token", s.cls}, {"sep_token", s.sep}, {"mask_token", s.mask}}) {
    if (id < 0) continue;
    const std::string piece = tokenizer.id_to_piece(id);
    specials[key] = piece;
    for (const json& added : file.value("added_tokens", json::array()))
      if (added.value("content", "") == piece &&
          (added.value("lstrip", false) || added.value("rstrip", false) || added.value("single_word", false) ||
           added.value("normalized", false))) {
        json token = added;
        token.erase("id");
        specials[key] = token;
      }
  }
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
  core::write_file_atomic((dir / data::kTokenizerJsonFile).string(), tokenizer_json);
  core::write_file_atomic((dir / data::kTokenizerConfigFile).string(), config.dump(2) + "\n");
  core::write_file_atomic((dir / data::kSpecialTokensMapFile).string(), specials.dump(2) + "\n");
}

}  // namespace roformer::tools
