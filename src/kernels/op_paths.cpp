// The fused ops' paths, noted once each; see op_paths.h.
#include "kernels/op_paths.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace roformer::kernels {

namespace {

struct Paths {
  std::mutex mu;  // the backward passes run on autograd's threads
  std::map<std::string, std::vector<std::string>> by_op;
};

Paths& paths() {
  static Paths p;
  return p;
}

}  // namespace

void note_op_path_text(const std::string& op, const std::string& path) {
  auto& p = paths();
  {
    std::lock_guard<std::mutex> lock(p.mu);
    auto& seen = p.by_op[op];
    if (std::find(seen.begin(), seen.end(), path) != seen.end()) return;
    seen.push_back(path);
  }
  spdlog::info("fused op {}: {}", op, path);
}

void note_op_path(const std::string& op, const std::optional<std::string>& why_not) {
  note_op_path_text(op, why_not ? "aten (" + *why_not + ")" : "triton");
}

std::map<std::string, std::string> op_paths() {
  auto& p = paths();
  std::lock_guard<std::mutex> lock(p.mu);
  std::map<std::string, std::string> out;
  for (const auto& [op, seen] : p.by_op) {
    std::string joined;
    for (const auto& path : seen) joined += (joined.empty() ? "" : "; ") + path;
    out[op] = joined;
  }
  return out;
}

void reset_op_paths() {
  auto& p = paths();
  std::lock_guard<std::mutex> lock(p.mu);
  p.by_op.clear();
}

}  // namespace roformer::kernels
