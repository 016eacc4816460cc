// ParquetTextReader: loads the Arrow plugin (parquet_source.h) once, at the first Parquet file, and
// reads through it. Without the plugin (a build without Arrow, or Arrow's libraries missing where
// roformer runs) opening a Parquet file is an error saying what to install; nothing else needs it.
#include "data/parquet_reader.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "data/parquet_source.h"

namespace roformer::data {

namespace {

namespace fs = std::filesystem;

struct Plugin {
  OpenParquetSource open = nullptr;
  std::string error;  // why it is not there: empty when `open` is set
};

// The plugin next to the running executable, else where the build put it. dlopen's RTLD_LOCAL keeps
// Arrow's own symbols (and the libraries it bundles) out of everyone else's way.
Plugin load_plugin() {
#ifdef ROFORMER_PARQUET_PLUGIN
  std::vector<std::string> candidates;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back((self.parent_path() / kParquetPluginFile).string());
  candidates.push_back(ROFORMER_PARQUET_PLUGIN);
  std::string tried;
  for (const auto& path : candidates) {
    if (!fs::exists(path, ec)) continue;
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return {nullptr, fmt::format("cannot load {}: {}", path, ::dlerror())};
    auto* open = reinterpret_cast<OpenParquetSource>(::dlsym(handle, kOpenParquetSymbol));
    if (!open) return {nullptr, fmt::format("{} has no {} (a plugin of another roformer version)", path, kOpenParquetSymbol)};
    return {open, ""};
  }
  return {nullptr, fmt::format("{} is neither next to the roformer executable nor at {}", kParquetPluginFile,
                               ROFORMER_PARQUET_PLUGIN)};
#else
  return {nullptr, ""};
#endif
}

const Plugin& plugin() {
  static std::once_flag once;
  static Plugin loaded;
  std::call_once(once, [] { loaded = load_plugin(); });
  return loaded;
}

}  // namespace

bool parquet_supported() { return plugin().open != nullptr; }

struct ParquetTextReader::Impl {
  std::unique_ptr<ParquetSource> source;
};

ParquetTextReader::ParquetTextReader(const std::string& path, const std::string& column) : impl_(std::make_unique<Impl>()) {
  const Plugin& p = plugin();
  if (!p.open && p.error.empty())
    throw Error(fmt::format("{} is a Parquet file, but this roformer was built without Parquet support (the Apache "
                            "Arrow C++ libraries were not found when it was configured): run scripts/setup.sh, which "
                            "installs them with pyarrow into its venv, then configure again (cmake build, or "
                            "rm -rf build && make build); or convert the file to JSONL", path));
  if (!p.open)
    throw Error(fmt::format("{} is a Parquet file, but roformer's Parquet support is not available here ({}); it "
                            "needs {} from the build and the Apache Arrow libraries it was built with (scripts/setup.sh "
                            "installs them with pyarrow); or convert the file to JSONL", path, p.error,
                            kParquetPluginFile));
  impl_->source.reset(p.open(path, column));
}

ParquetTextReader::~ParquetTextReader() = default;

bool ParquetTextReader::next(std::string& text, int64_t& row) { return impl_->source->next(text, row); }

int64_t ParquetTextReader::bytes_read() const { return impl_->source->bytes_read(); }

}  // namespace roformer::data
