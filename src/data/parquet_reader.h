// The texts of one string column of a Parquet file, through the Apache Arrow C++ libraries (the
// ones the pyarrow wheel ships; CMakeLists.txt, "Input formats"), which live in a plugin loaded at
// the first Parquet file (parquet_source.h). Row groups are read in order, 1024 rows at a time from
// buffered page streams, so memory is bounded by a batch, not by the file or a row group. The column
// may be string, large_string, string_view or dictionary-encoded strings, compressed with any codec
// Arrow reads (snappy, zstd, gzip, ...). Without the plugin (parquet_supported() false), opening a
// file is a roformer::Error saying what to install.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace roformer::data {

// True when Parquet can be read here (the plugin and Arrow's libraries load).
bool parquet_supported();

class ParquetTextReader {
 public:
  // Throws roformer::Error when the file is not readable Parquet, has no column `column` (the
  // message lists the columns it has) or the column does not hold strings.
  ParquetTextReader(const std::string& path, const std::string& column);
  ~ParquetTextReader();
  ParquetTextReader(const ParquetTextReader&) = delete;
  ParquetTextReader& operator=(const ParquetTextReader&) = delete;

  // The next non-null value into `text` and its row (counting from 0, nulls included) into `row`;
  // false after the last row. Throws roformer::Error on damaged data, naming the row group.
  bool next(std::string& text, int64_t& row);
  // The file's size times the share of rows read (for progress); the file's size at the end.
  int64_t bytes_read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace roformer::data
