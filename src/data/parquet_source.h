// The interface between ParquetTextReader (parquet_reader.cpp, in the library) and its Arrow
// implementation (parquet_arrow.cpp, built as the plugin libroformer_parquet.so). The plugin is
// loaded with dlopen at the first Parquet file, so roformer starts, and reads every other format,
// where the Arrow libraries are absent (a copied binary, a machine without pyarrow).
#pragma once

#include <cstdint>
#include <string>

namespace roformer::data {

class ParquetSource {
 public:
  virtual ~ParquetSource() = default;
  // See ParquetTextReader::next and bytes_read.
  virtual bool next(std::string& text, int64_t& row) = 0;
  virtual int64_t bytes_read() const = 0;
};

// The plugin's one exported function: opens `path` and its text column `column`; throws
// roformer::Error as ParquetTextReader's constructor does. The caller owns the result.
using OpenParquetSource = ParquetSource* (*)(const std::string& path, const std::string& column);
constexpr const char* kOpenParquetSymbol = "roformer_open_parquet_v1";
constexpr const char* kParquetPluginFile = "libroformer_parquet.so";

}  // namespace roformer::data
