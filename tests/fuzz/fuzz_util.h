// Shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp, built with -DROFORMER_BUILD_FUZZERS=ON,
// run by scripts/fuzz.sh). Each target feeds bytes to one parser of untrusted input. The only
// acceptable failure is roformer::Error (a user-facing message); any other exception escapes
// LLVMFuzzerTestOneInput, aborts, and libFuzzer records the input as a crash, as it does for the
// memory errors and undefined behaviour the sanitizers catch.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace roformer::fuzz {

// A per-process scratch path under $TMPDIR (scripts/fuzz.sh points it at /dev/shm when present).
inline std::filesystem::path scratch(const std::string& name) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("roformer-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir / name;
}

inline void write_bytes(const std::filesystem::path& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// Runs `fn`; a roformer::Error is an accepted outcome, anything else propagates (a crash).
template <class Fn>
bool accepts(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const roformer::Error&) {
    return false;
  }
}

// Stops the fuzzer on a violated property (libFuzzer reports the abort with the input).
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace roformer::fuzz
