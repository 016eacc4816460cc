// Hugging Face parameter names per family; see hf_names.h.
#include "model/hf_names.h"

#include <array>
#include <utility>

namespace roformer::model {
namespace {

constexpr const char* kOurPrefix = "roformer.";

const char* prefix(HfFamily family) {
  switch (family) {
    case HfFamily::kRoFormer: return "roformer.";
    case HfFamily::kBert: return "bert.";
    case HfFamily::kDebertaV2: return "deberta.";
  }
  return kOurPrefix;
}

// DebertaV2's DisentangledSelfAttention calls the projections query_proj, key_proj, value_proj.
constexpr std::array<std::pair<const char*, const char*>, 3> kDebertaProjections = {
    {{".attention.self.query.", ".attention.self.query_proj."},
     {".attention.self.key.", ".attention.self.key_proj."},
     {".attention.self.value.", ".attention.self.value_proj."}}};

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// `name` with its first `from` replaced by `to` (unchanged when it holds none).
std::string replaced(std::string name, const std::string& from, const std::string& to) {
  const auto at = name.find(from);
  if (at != std::string::npos) name.replace(at, from.size(), to);
  return name;
}

}  // namespace

std::optional<HfFamily> hf_family(const config::ModelConfig& m) {
  switch (m.position) {
    case config::Position::kRotary: return HfFamily::kRoFormer;
    case config::Position::kAbsolute: return HfFamily::kBert;
    case config::Position::kDisentangled: return HfFamily::kDebertaV2;
    case config::Position::kNone: break;
  }
  return std::nullopt;
}

std::string to_hf_name(const std::string& name, HfFamily family) {
  if (!starts_with(name, kOurPrefix)) return name;
  std::string out = prefix(family) + name.substr(std::string(kOurPrefix).size());
  if (family == HfFamily::kDebertaV2)
    for (const auto& [ours, theirs] : kDebertaProjections) out = replaced(out, ours, theirs);
  return out;
}

std::string from_hf_name(const std::string& name, HfFamily family) {
  const std::string theirs_prefix = prefix(family);
  if (!starts_with(name, theirs_prefix)) return name;
  std::string out = kOurPrefix + name.substr(theirs_prefix.size());
  if (family == HfFamily::kDebertaV2)
    for (const auto& [ours, theirs] : kDebertaProjections) out = replaced(out, theirs, ours);
  return out;
}

}  // namespace roformer::model
