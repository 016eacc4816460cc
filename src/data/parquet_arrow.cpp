// The Parquet plugin, libroformer_parquet.so: a ParquetSource (parquet_source.h) through Apache
// Arrow, behind ParquetTextReader (parquet_reader.h). Arrow's headers need C++20, so this file is
// compiled as C++20 into its own module (CMakeLists.txt, "Input formats"); nothing of Arrow leaves it.
#include <fmt/format.h>

#include "core/error.h"
#include "data/parquet_source.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/properties.h>

#include <string_view>
#include <vector>

namespace roformer::data {

namespace {

constexpr int64_t kBatchRows = 1024;              // rows decoded at a time
constexpr int64_t kStreamBufferBytes = 1 << 20;  // read buffer of each column chunk's page stream

bool is_text_type(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW: return true;
    case arrow::Type::DICTIONARY:
      return is_text_type(*static_cast<const arrow::DictionaryType&>(type).value_type());
    default: return false;
  }
}

// Row i of a text array (see is_text_type) into `out`; false when it is null.
bool text_at(const arrow::Array& values, int64_t i, std::string& out) {
  if (values.IsNull(i)) return false;
  std::string_view view;
  switch (values.type_id()) {
    case arrow::Type::STRING: view = static_cast<const arrow::StringArray&>(values).GetView(i); break;
    case arrow::Type::LARGE_STRING: view = static_cast<const arrow::LargeStringArray&>(values).GetView(i); break;
    case arrow::Type::STRING_VIEW: view = static_cast<const arrow::StringViewArray&>(values).GetView(i); break;
    case arrow::Type::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryArray&>(values);
      return text_at(*dict.dictionary(), dict.GetValueIndex(i), out);
    }
    default: return false;
  }
  out.assign(view.data(), view.size());
  return true;
}

// "name (type), ..." of every column, and the text columns' names alone.
std::pair<std::string, std::string> describe_columns(const arrow::Schema& schema) {
  std::string all, text;
  for (const auto& f : schema.fields()) {
    all += fmt::format("{}{} ({})", all.empty() ? "" : ", ", f->name(), f->type()->ToString());
    if (is_text_type(*f->type())) text += (text.empty() ? "" : ", ") + f->name();
  }
  return {all, text.empty() ? std::string("none") : text};
}

}  // namespace

class ArrowParquetSource : public ParquetSource {
 public:
  ArrowParquetSource(const std::string& path, const std::string& column);
  bool next(std::string& text, int64_t& row) override;
  int64_t bytes_read() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ArrowParquetSource::Impl {
  std::string path, column;
  int leaf = 0;  // the column's index among the file's leaf columns
  int64_t file_size = 0, total_rows = 0;
  std::vector<int64_t> group_start;  // the first row of each row group, then total_rows
  std::unique_ptr<parquet::arrow::FileReader> reader;
  int group = -1;                                   // the row group being read
  std::unique_ptr<arrow::RecordBatchReader> batches;  // its batches
  std::shared_ptr<arrow::Array> values;             // the column of the current batch
  int64_t batch_first_row = 0, index = 0;           // the batch's first row; the next row within it

  [[noreturn]] void damaged(const std::string& detail) const {
    throw Error(fmt::format("{}: cannot read column \"{}\" in row group {} (rows {} to {} of {}): {}; the file is "
                            "damaged: download or copy it again", path, column, group, group_start[group],
                            group_start[group + 1] - 1, total_rows, detail));
  }

  void open() {
    arrow::MemoryPool* pool = arrow::system_memory_pool();
    auto file = arrow::io::ReadableFile::Open(path, pool);
    if (!file.ok()) throw Error(fmt::format("cannot open input file {}: {}", path, file.status().message()));
    file_size = (*file)->GetSize().ValueOr(0);
    parquet::ReaderProperties props(pool);
    props.enable_buffered_stream();  // page by page: a column chunk is never read whole
    props.set_buffer_size(kStreamBufferBytes);
    props.set_page_checksum_verification(true);  // pages written with CRCs: a flipped bit is an error
    parquet::ArrowReaderProperties arrow_props;
    arrow_props.set_batch_size(kBatchRows);
    arrow_props.set_use_threads(false);
    arrow_props.set_pre_buffer(false);
    parquet::arrow::FileReaderBuilder builder;
    const arrow::Status opened = builder.Open(*file, props);
    if (!opened.ok())
      throw Error(fmt::format("{}: not a readable Parquet file ({}); if it was cut short, download or copy it again",
                              path, opened.message()));
    auto built = builder.memory_pool(pool)->properties(arrow_props)->Build();
    if (!built.ok()) throw Error(fmt::format("{}: cannot read as Parquet: {}", path, built.status().message()));
    reader = std::move(*built);
    std::shared_ptr<arrow::Schema> schema;
    const arrow::Status got_schema = reader->GetSchema(&schema);
    if (!got_schema.ok()) throw Error(fmt::format("{}: cannot read the Parquet schema: {}", path, got_schema.message()));
    leaf = text_column(*schema);
    const auto metadata = reader->parquet_reader()->metadata();
    group_start = {0};
    for (int g = 0; g < metadata->num_row_groups(); ++g)
      group_start.push_back(group_start.back() + metadata->RowGroup(g)->num_rows());
    total_rows = group_start.back();
  }

  // The leaf index of `column`; an error listing the columns when it is missing or holds no text.
  int text_column(const arrow::Schema& schema) const {
    const auto [columns, text_columns] = describe_columns(schema);
    const auto found = schema.GetAllFieldIndices(column);
    if (found.empty())
      throw Error(fmt::format("{} has no column \"{}\"; its columns: {}. Choose the text column with --text-field "
                              "or data.text_field (text columns here: {})", path, column, columns, text_columns));
    if (found.size() > 1) throw Error(fmt::format("{} has {} columns named \"{}\"; rename them", path, found.size(), column));
    const auto& type = *schema.field(found[0])->type();
    if (!is_text_type(type))
      throw Error(fmt::format("{}: column \"{}\" holds {}, not text; choose the text column with --text-field or "
                              "data.text_field (text columns here: {})", path, column, type.ToString(), text_columns));
    return reader->parquet_reader()->metadata()->schema()->ColumnIndex(column);
  }

  // The next batch into `values`, from the next row group when one ends; false after the last.
  bool next_batch() {
    batch_first_row += values ? values->length() : 0;
    index = 0;
    values.reset();
    try {
      for (;;) {
        if (!batches) {
          if (group + 1 >= static_cast<int>(group_start.size()) - 1) return false;
          ++group;
          batch_first_row = group_start[group];
          auto stream = reader->GetRecordBatchReader({group}, {leaf});
          if (!stream.ok()) damaged(stream.status().message());
          batches = std::move(*stream);
        }
        std::shared_ptr<arrow::RecordBatch> batch;
        const arrow::Status read = batches->ReadNext(&batch);
        if (!read.ok()) damaged(read.message());
        if (batch) {
          values = batch->column(0);
          return true;
        }
        batches.reset();  // the row group is done
      }
    } catch (const parquet::ParquetException& e) {
      damaged(e.what());
    }
  }
};

ArrowParquetSource::ArrowParquetSource(const std::string& path, const std::string& column) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->column = column;
  try {
    impl_->open();
  } catch (const parquet::ParquetException& e) {
    throw Error(fmt::format("{}: not a readable Parquet file ({}); if it was cut short, download or copy it again",
                            path, e.what()));
  }
}

bool ArrowParquetSource::next(std::string& text, int64_t& row) {
  Impl& s = *impl_;
  for (;;) {
    if (!s.values || s.index >= s.values->length()) {
      if (!s.next_batch()) return false;
      continue;
    }
    row = s.batch_first_row + s.index;
    if (text_at(*s.values, s.index++, text)) return true;
  }
}

int64_t ArrowParquetSource::bytes_read() const {
  const Impl& s = *impl_;
  if (s.total_rows <= 0) return s.file_size;
  const int64_t rows = s.values ? s.batch_first_row + s.index : s.group_start[s.group + 1];
  return static_cast<int64_t>(static_cast<double>(s.file_size) * static_cast<double>(rows) / s.total_rows);
}

}  // namespace roformer::data

// The plugin's entry point (kOpenParquetSymbol); C linkage gives it a plain name for dlsym.
extern "C" roformer::data::ParquetSource* roformer_open_parquet_v1(const std::string& path, const std::string& column) {
  return new roformer::data::ArrowParquetSource(path, column);
}
