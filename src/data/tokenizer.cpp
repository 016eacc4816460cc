// Tokenizer: the choice of backend for a path, the fingerprint, and the per-id flags (special, word
// start) every caller reads; see tokenizer.h.
#include "data/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/file.h"
#include "data/hf_tokenizer/hf_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"

namespace roformer::data {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL, kFnvPrime = 0x100000001b3ULL;

uint64_t fnv1a(uint64_t h, const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kFnvPrime;
  }
  return h;
}

std::string hex16(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The file a path names: itself, or a directory's tokenizer.json (else its tokenizer.model).
std::string tokenizer_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error("tokenizer not found: " + path + " (train one with `roformer tokenizer train`, or give a Hugging Face "
                "tokenizer.json or the directory holding one)");
  if (!fs::is_directory(path, ec)) return path;
  for (const char* name : {kTokenizerJsonFile, kTokenizerModelFile})
    if (fs::is_regular_file(fs::path(path) / name, ec)) return (fs::path(path) / name).string();
  throw Error("tokenizer " + path + " is a directory without a tokenizer.json or tokenizer.model; give the file itself "
              "or the directory that holds one (a Hugging Face model directory, a run's tokenizer/)");
}

bool is_json_name(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  return name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0;
}

}  // namespace

std::string SpecialTokens::describe() const {
  const auto one = [](const char* name, int32_t id) {
    return std::string(name) + "=" + (id < 0 ? std::string("none") : std::to_string(id));
  };
  return one("pad", pad) + " " + one("unk", unk) + " " + one("cls", cls) + " " + one("sep", sep) + " " + one("mask", mask);
}

std::string SpecialTokens::missing_for_mlm() const {
  std::string out;
  for (const auto& [name, id] : {std::pair<const char*, int32_t>{"mask", mask}, {"cls", cls}, {"sep", sep}, {"pad", pad}})
    if (id < 0) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

std::string file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  uint64_t h = kFnvOffset;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof(buf));
    h = fnv1a(h, buf, static_cast<size_t>(in.gcount()));
  }
  return hex16(h);
}

std::string bytes_fingerprint(std::string_view bytes) { return hex16(fnv1a(kFnvOffset, bytes.data(), bytes.size())); }

Tokenizer Tokenizer::load(const std::string& path) {
  const std::string file = tokenizer_file(path);
  Tokenizer t;
  t.model_path_ = file;
  if (is_json_name(file)) {
    t.backend_ = hf::load_hf_tokenizer(file);
    // The file and the roles resolved for it (from it, or from the files beside it).
    t.fingerprint_ = bytes_fingerprint(t.backend_->files().front().second + "\nspecial " +
                                       t.backend_->special_tokens().describe());
  } else {
    const std::string bytes = core::read_file(file, "tokenizer model");
    t.backend_ = load_sentencepiece(file, bytes);
    t.fingerprint_ = bytes_fingerprint(bytes);
  }
  t.special_ = t.backend_->special_tokens();
  const int64_t n = t.backend_->vocab_size();
  t.flags_.assign(static_cast<size_t>(n), 0);
  const SpecialTokens& s = t.special_;
  for (const int32_t id : {s.pad, s.unk, s.cls, s.sep, s.mask})
    if (id >= 0 && id < n) t.flags_[id] |= kSpecialFlag;
  for (const int32_t id : t.backend_->other_special_ids())
    if (id >= 0 && id < n) t.flags_[id] |= kSpecialFlag;
  for (int32_t id = 0; id < n; ++id)
    if (!(t.flags_[id] & kSpecialFlag) && t.backend_->is_word_start(id)) t.flags_[id] |= kWordStartFlag;
  return t;
}

std::string Tokenizer::id_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (size " + std::to_string(vocab_size()) + ")");
  return backend_->id_to_piece(id);
}

std::vector<int32_t> Tokenizer::special_ids() const {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < vocab_size(); ++id)
    if (flags_[id] & kSpecialFlag) out.push_back(id);
  return out;
}

std::vector<uint8_t> Tokenizer::word_start_table() const {
  std::vector<uint8_t> out(flags_.size());
  for (size_t id = 0; id < flags_.size(); ++id) out[id] = (flags_[id] & kWordStartFlag) ? 1 : 0;
  return out;
}

std::string Tokenizer::save(const std::string& dir) const {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create '{}': {}", dir, ec.message()));
  const auto all = files();
  // Each file written whole or not at all: a full disk leaves no truncated copy for a resume to refuse.
  for (const auto& [name, bytes] : all) core::write_file_atomic((fs::path(dir) / name).string(), bytes);
  return (fs::path(dir) / all.front().first).string();
}

void Tokenizer::check_mlm_roles() const {
  const std::string missing = special_.missing_for_mlm();
  if (missing.empty()) return;
  throw Error(fmt::format("tokenizer {} has no {} token, which masked-language-model training needs ({}); name it in "
                          "a special_tokens_map.json beside the tokenizer.json (e.g. {{\"mask_token\": \"[MASK]\"}}), or "
                          "add the token with tokenizers' add_special_tokens and save the tokenizer again",
                          model_path_, missing, special_.describe()));
}

}  // namespace roformer::data
