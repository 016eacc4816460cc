// `prepare_corpus`: text -> binary token shards (the reader of the result is corpus.cpp). Four
// parts, each with its own state:
//   read_chunks      this thread: reads the files (decompressing, decoding Parquet) and groups
//                    documents into chunks of about kChunkBytes
//   EncoderPool      N threads: parse JSONL lines and encode chunks with the tokenizer
//   ShardWriter      one thread: appends the encoded chunks in chunk order (so the bytes written do
//                    not depend on the thread count) to shards in a staging directory; an input
//                    error travels in its chunk, so the first one in input order is reported
//   publish          moves the finished files into place and writes meta.json last
// ChunkQueue is what they share: the queues between them, the bound on memory and the first error.
#include "data/corpus.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/file.h"
#include "core/progress_bar.h"
#include "core/publish.h"
#include "core/utf8.h"
#include "data/corpus_format.h"
#include "data/input_files.h"
#include "data/read_progress.h"
#include "data/text_reader.h"
#include "data/tokenizer.h"

namespace roformer::data {

namespace fs = std::filesystem;
using format::FileHeader;
using format::make_header;
using format::shard_name;

namespace {

constexpr size_t kChunkBytes = 256 * 1024;  // text per work item
// Text of the chunks in flight at most, unless one chunk alone holds more (a JSONL line of up to
// kMaxRecordBytes): memory does not grow with the thread count times the longest record.
constexpr int64_t kMaxInFlightBytes = 64 * 1024 * 1024;
constexpr const char* kStagingPrefix = ".prepare-staging-";

// Appends elements to a file after a header that is rewritten with the final count on close; the
// file carries a .tmp suffix until then. The first failed write throws, with the system's reason (a
// full disk, a file-size limit), so a run stops at once instead of encoding on.
class BinaryWriter {
 public:
  BinaryWriter(const fs::path& path) : path_(path), tmp_(path.string() + ".tmp"), out_(tmp_, std::ios::binary | std::ios::trunc) {
    if (!out_) throw Error(fmt::format("cannot create {}: {}", tmp_, std::strerror(errno)));
    FileHeader blank{};
    write(&blank, sizeof(blank));
  }
  void write(const void* data, size_t bytes) {
    errno = 0;
    out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!out_) failed();
  }
  void close(const FileHeader& header) {
    errno = 0;
    out_.seekp(0);
    out_.write(reinterpret_cast<const char*>(&header), sizeof(header));
    out_.close();
    if (!out_) failed();
    fs::rename(tmp_, path_);
  }

 private:
  [[noreturn]] void failed() const {
    throw Error(fmt::format("cannot write {}: {}", tmp_, errno ? std::strerror(errno) : "a write failed (disk full?)"));
  }
  fs::path path_;
  std::string tmp_;
  std::ofstream out_;
};

// A document as the reader hands it on: its paragraphs, or a JSONL line that an encoder parses
// (JSON parsing is the costly part of reading, so it runs on the encoder threads). A long plain-text
// document comes in parts, each but the last marked `continues`.
struct PendingDocument {
  std::vector<std::string> paragraphs;
  std::string json_line;
  const std::string* path = nullptr;  // of the JSONL file, for its errors
  int64_t line_number = 0;
  bool continues = false;
};

// The tokens of one document part, and whether its document ends with it.
struct EncodedPart {
  int64_t tokens = 0;
  bool ends_document = true;
};

struct Chunk {
  int64_t id = 0;
  std::vector<PendingDocument> docs;
  int64_t input_bytes = 0;                     // of the files, as stored
  int64_t text_bytes = 0;                      // of the paragraphs, a newline each (counted by the encoder)
  int64_t files_done = 0;                      // input files read to the end when the chunk was cut
  int64_t held_bytes = 0;                      // of text, as read (the bound on chunks in flight)
  std::string error;                           // the input's first error, reported when the writer reaches it
  std::vector<int32_t> tokens;                 // encoded, document parts concatenated
  std::vector<EncodedPart> parts;              // one per document part of `docs`
};

// What every file of one prepare run records about the tokenizer.
struct TokenFormat {
  uint32_t token_bytes = 2;  // 2 when the vocabulary is < 65536, else 4
  int64_t vocab = 0;
  std::string fingerprint;
};

// The queues between the parts, under one mutex. Chunks go reader -> `work` -> encoders -> `done`
// (keyed by id) -> writer. in_flight bounds memory: the reader waits while that many chunks, or
// kMaxInFlightBytes of their text, are queued, being encoded, or waiting for the writer (a chunk
// alone may hold more). The first error stops every part.
class ChunkQueue {
 public:
  explicit ChunkQueue(int64_t max_in_flight) : max_in_flight_(max_in_flight) {}

  // Reader: queues the chunk under the next id, waiting for room; false when a part failed.
  bool submit(std::unique_ptr<Chunk> chunk) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      return failed_ || in_flight_ == 0 ||
             (in_flight_ < max_in_flight_ && in_flight_bytes_ + chunk->held_bytes <= kMaxInFlightBytes);
    });
    if (failed_) return false;
    chunk->id = submitted_++;
    ++in_flight_;
    in_flight_bytes_ += chunk->held_bytes;
    work_.push_back(std::move(chunk));
    cv_.notify_all();
    return true;
  }
  // Reader: no more chunks. `complete` is false when a chunk could not be queued because a part
  // failed (the writer then never ends on its own: it waits for the failure).
  void finish_reading(bool complete) {
    std::lock_guard<std::mutex> lock(mu_);
    if (complete) chunks_total_ = submitted_;
    reading_finished_ = true;
    cv_.notify_all();
  }
  // Encoder: the next chunk to encode; null when reading is done and the queue empty, or on failure.
  std::unique_ptr<Chunk> take_work() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return failed_ || !work_.empty() || reading_finished_; });
    if (failed_ || work_.empty()) return nullptr;
    auto chunk = std::move(work_.front());
    work_.pop_front();
    return chunk;
  }
  // Encoder: an encoded chunk for the writer.
  void put_done(std::unique_ptr<Chunk> chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t id = chunk->id;
    done_.emplace(id, std::move(chunk));
    cv_.notify_all();
  }
  // Writer: chunk `id` once encoded; null after the last chunk, or on failure (see failed()).
  std::unique_ptr<Chunk> take_done(int64_t id) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return failed_ || done_.count(id) || (chunks_total_ >= 0 && id >= chunks_total_); });
    if (failed_ || !done_.count(id)) return nullptr;
    auto chunk = std::move(done_[id]);
    done_.erase(id);
    return chunk;
  }
  // Writer: a chunk is written; the reader may queue another.
  void release(const Chunk& chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    in_flight_bytes_ -= chunk.held_bytes;
    cv_.notify_all();
  }
  // Any part: records the first error and wakes everyone to stop.
  void fail(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_) error_ = message;
    failed_ = true;
    cv_.notify_all();
  }
  bool failed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }
  std::string error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Chunk>> work_;
  std::map<int64_t, std::unique_ptr<Chunk>> done_;
  const int64_t max_in_flight_;
  int64_t in_flight_ = 0, in_flight_bytes_ = 0;
  int64_t submitted_ = 0;      // the next chunk id
  int64_t chunks_total_ = -1;  // known once reading completed
  bool reading_finished_ = false, failed_ = false;
  std::string error_;
};

// The next document of `reader` into `doc`, JSONL left unparsed; false at the end of the file.
bool next_pending(DocumentReader& reader, const std::string& path, PendingDocument& doc) {
  if (reader.format() != InputFormat::kJsonl) {
    const bool got = reader.next(doc.paragraphs);
    doc.continues = reader.document_continues();
    return got;
  }
  doc.path = &path;
  return reader.next_jsonl_line(doc.json_line, doc.line_number);
}

// The reader (runs on the calling thread): the files in order, cut into chunks of documents (a
// chunk may end between the parts of a long one). Its
// own error (a damaged file) travels as the last chunk, so that an error in an earlier document,
// found on an encoder thread, is still the one reported, as if the input were read in one pass.
void read_chunks(const std::vector<std::string>& files, const PrepareOptions& options, ChunkQueue& queue) {
  auto chunk = std::make_unique<Chunk>();
  bool ok = true;
  try {
    size_t chunk_bytes = 0;
    for (size_t f = 0; f < files.size() && ok; ++f) {
      DocumentReader reader(files[f], options.text_field);
      PendingDocument doc;
      int64_t last_bytes = 0;
      while (ok && next_pending(reader, files[f], doc)) {
        chunk_bytes += doc.json_line.size();
        for (const auto& p : doc.paragraphs) chunk_bytes += p.size() + 1;
        chunk->held_bytes = static_cast<int64_t>(chunk_bytes);
        chunk->input_bytes += reader.bytes_read() - last_bytes;
        last_bytes = reader.bytes_read();
        chunk->docs.push_back(std::move(doc));
        doc = {};
        if (chunk_bytes >= kChunkBytes) {
          chunk->files_done = static_cast<int64_t>(f);
          ok = queue.submit(std::move(chunk));
          chunk = std::make_unique<Chunk>();
          chunk_bytes = 0;
        }
      }
      chunk->input_bytes += reader.bytes_read() - last_bytes;
    }
    chunk->files_done = static_cast<int64_t>(files.size());
  } catch (const std::exception& e) {
    chunk->error = e.what();
  }
  // The last chunk also carries the bytes of trailing empty files, so the totals are exact.
  if (ok && (!chunk->docs.empty() || chunk->input_bytes > 0 || !chunk->error.empty())) ok = queue.submit(std::move(chunk));
  queue.finish_reading(/*complete=*/ok);
}

// N threads encoding chunks: each document's paragraphs concatenated, empty documents dropped.
class EncoderPool {
 public:
  EncoderPool(const Tokenizer& tokenizer, const std::string& text_field, ChunkQueue& queue, int64_t threads)
      : tokenizer_(tokenizer), text_field_(text_field), queue_(queue) {
    try {
      for (int64_t w = 0; w < threads; ++w) threads_.emplace_back([this] { run(); });
    } catch (const std::system_error& e) {  // the threads started stop at the failure, then the error
      queue_.fail(e.what());
      join();
      throw Error(fmt::format("cannot start {} encoding threads (the system gave {}: {}); lower --threads", threads,
                              threads_.size(), e.what()));
    }
  }
  ~EncoderPool() { join(); }
  void join() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  void run() {
    while (auto chunk = queue_.take_work()) {
      if (chunk->error.empty()) {
        try {
          encode(*chunk);
        } catch (const std::exception& e) {
          chunk->error = e.what();  // reported when the writer reaches this chunk
        }
      }
      queue_.put_done(std::move(chunk));
    }
  }
  void encode(Chunk& chunk) const {
    for (auto& doc : chunk.docs) {
      if (doc.path) {
        parse_jsonl_line(doc.json_line, text_field_, *doc.path, doc.line_number, doc.paragraphs);
        std::string().swap(doc.json_line);  // a record may be large: only its paragraphs are kept
      }
      const size_t before = chunk.tokens.size();
      for (auto& para : doc.paragraphs) {
        const auto ids = tokenizer_.encode(para);
        chunk.tokens.insert(chunk.tokens.end(), ids.begin(), ids.end());
        chunk.text_bytes += static_cast<int64_t>(para.size()) + 1;
        std::string().swap(para);
      }
      chunk.parts.push_back({static_cast<int64_t>(chunk.tokens.size() - before), !doc.continues});
    }
    chunk.docs.clear();
  }

  const Tokenizer& tokenizer_;
  const std::string text_field_;
  ChunkQueue& queue_;
  std::vector<std::thread> threads_;
};

// What the writer produced: counts and, per shard, its tokens and documents.
struct WrittenShards {
  PrepareStats stats;
  std::vector<int64_t> shard_tokens, shard_docs;
};

// Appends documents to shard_00000.tok, shard_00001.tok, ... in `dir` (a new shard when the next
// document would pass `max_shard_tokens`, judged by its first part; a document never crosses
// shards) and their end offsets to the document index. Documents without tokens are left out.
class ShardWriter {
 public:
  ShardWriter(const fs::path& dir, const TokenFormat& token_format, int64_t max_shard_tokens)
      : dir_(dir), format_(token_format), max_shard_tokens_(max_shard_tokens), index_(dir / format::kIndexFile) {
    index_.write(&offset_, sizeof(offset_));
  }
  void append(const Chunk& chunk) {
    int64_t pos = 0;
    for (const EncodedPart& part : chunk.parts) {
      append_part(chunk.tokens.data() + pos, part);
      pos += part.tokens;
    }
    out_.stats.tokens += pos;
    out_.stats.bytes += chunk.input_bytes;
    out_.stats.text_bytes += chunk.text_bytes;
  }
  // Closes the last shard and the index.
  void finish() {
    if (open_tokens_ > 0) throw std::logic_error("prepare: the input ended inside a document");
    if (shard_) close_shard();
    index_.close(make_header(format::kIndexMagic, 8, out_.stats.documents + 1, out_.stats.documents, format_.vocab,
                             format_.fingerprint, 0));
  }
  const WrittenShards& written() const { return out_; }

 private:
  void append_part(const int32_t* tokens, const EncodedPart& part) {
    const int64_t len = part.tokens;
    if (len > 0) write_tokens(tokens, len);
    open_tokens_ += len;
    if (!part.ends_document || open_tokens_ == 0) return;
    ++shard_docs_;
    offset_ += static_cast<uint64_t>(open_tokens_);
    index_.write(&offset_, sizeof(offset_));
    ++out_.stats.documents;
    open_tokens_ = 0;
  }
  void write_tokens(const int32_t* tokens, int64_t len) {
    if (open_tokens_ == 0 && shard_ && shard_tokens_ > 0 && shard_tokens_ + len > max_shard_tokens_) close_shard();
    if (!shard_) shard_ = std::make_unique<BinaryWriter>(dir_ / shard_name(static_cast<int64_t>(out_.shard_tokens.size())));
    buffer_.resize(static_cast<size_t>(len) * format_.token_bytes);
    for (int64_t k = 0; k < len; ++k) {
      const uint32_t id = static_cast<uint32_t>(tokens[k]);
      if (format_.token_bytes == 2) {
        const uint16_t v = static_cast<uint16_t>(id);
        std::memcpy(&buffer_[k * 2], &v, 2);
      } else {
        std::memcpy(&buffer_[k * 4], &id, 4);
      }
    }
    shard_->write(buffer_.data(), buffer_.size());
    shard_tokens_ += len;
  }
  void close_shard() {
    shard_->close(make_header(format::kShardMagic, format_.token_bytes, shard_tokens_, shard_docs_, format_.vocab,
                              format_.fingerprint, static_cast<uint32_t>(out_.shard_tokens.size())));
    out_.shard_tokens.push_back(shard_tokens_);
    out_.shard_docs.push_back(shard_docs_);
    shard_.reset();
    shard_tokens_ = shard_docs_ = 0;
  }

  fs::path dir_;
  TokenFormat format_;
  int64_t max_shard_tokens_;
  BinaryWriter index_;
  uint64_t offset_ = 0;                 // documents' tokens written so far
  std::unique_ptr<BinaryWriter> shard_;  // the open shard, if any
  int64_t shard_tokens_ = 0, shard_docs_ = 0;
  int64_t open_tokens_ = 0;             // tokens of the document under way (parts written so far)
  std::vector<uint8_t> buffer_;
  WrittenShards out_;
};

// The writer thread: chunks strictly in id order into a ShardWriter. Leaves `result` empty on failure.
void write_chunks(ChunkQueue& queue, const fs::path& staging, const TokenFormat& token_format, const PrepareOptions& options,
                  int64_t total_files, int64_t total_bytes, WrittenShards& result) {
  try {
    ReadProgress progress("prepare", options.progress, total_files, total_bytes);
    ShardWriter writer(staging, token_format, options.shard_tokens);
    int64_t files_done = 0;
    for (int64_t next = 0;; ++next) {
      const auto chunk = queue.take_done(next);
      if (!chunk) break;
      if (!chunk->error.empty()) {
        queue.fail(chunk->error);
        break;
      }
      writer.append(*chunk);
      files_done = chunk->files_done;
      progress.update(files_done, writer.written().stats.bytes, writer.written().stats.tokens);
      queue.release(*chunk);
    }
    if (queue.failed()) return;
    writer.finish();
    result = writer.written();
    progress.update(total_files, result.stats.bytes, result.stats.tokens, true);  // every file is read now
  } catch (const std::exception& e) {
    queue.fail(e.what());
  }
}

// This run's staging folder inside `out` (core/publish.h: a killed run's is removed by the next
// one); `out` itself is made and held by the run's OutputDirClaim.
class Staging {
 public:
  explicit Staging(const fs::path& out) : dir_(out, kStagingPrefix) {}
  const fs::path& dir() const { return dir_.path(); }
  core::StagingDir& staging_dir() { return dir_; }

  // Removes the staging folder (the claim then removes `out` when the run made it: nothing of anyone
  // else's is removed) and throws `message`.
  [[noreturn]] void abort(const std::string& message) const {
    std::error_code ec;
    core::remove_tree(dir_.path(), ec);
    throw Error(message);
  }

 private:
  core::StagingDir dir_;
};

// "shard_NNNNN.tok" (five or more digits).
bool is_shard_name(const std::string& name) {
  const size_t digits = name.size() - std::min(name.size(), std::strlen("shard_.tok"));
  return digits >= 5 && name.rfind("shard_", 0) == 0 && name.compare(6 + digits, 4, ".tok") == 0 &&
         name.find_first_not_of("0123456789", 6) == 6 + digits;
}

// A file `prepare` writes, by its name and its magic: the index, the word starts or a shard.
bool is_corpus_file(const fs::path& path) {
  const std::string name = path.filename().string();
  const char* magic = name == format::kIndexFile ? format::kIndexMagic
                      : name == format::kWordStartsFile ? format::kWordMagic
                      : is_shard_name(name) ? format::kShardMagic
                                            : nullptr;
  if (magic == nullptr) return false;
  std::ifstream in(path, std::ios::binary);
  char head[8] = {};
  return in.read(head, sizeof head) && std::memcmp(head, magic, sizeof head) == 0;
}

// The files of the prepared corpus in `dir` that a new one replaces: meta.json, the index, the word
// starts and the shards its meta.json lists (plain names), and nothing else of the folder (a user's
// shard_notes.txt stays). In a folder the caller owns (a run's data cache, whose meta.json an
// interrupted run may have removed), every name a shard of ours has as well.
std::vector<fs::path> old_corpus_files(const fs::path& dir, bool own_dir) {
  std::vector<fs::path> files = {dir / format::kMetaFile, dir / format::kIndexFile, dir / format::kWordStartsFile};
  try {
    const auto meta = nlohmann::json::parse(core::read_file((dir / format::kMetaFile).string(), "meta.json"));
    for (const auto& shard : meta.at("shards")) {
      const std::string name = shard.at("file").get<std::string>();
      if (!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..") files.push_back(dir / name);
    }
  } catch (const std::exception&) {
    // No readable list: only the fixed names and the shards below.
  }
  // Shards a list misses (an interrupted replacement removed meta.json first): in our own folder every
  // shard name, elsewhere those that are shards by their bytes too.
  for (const auto& entry : fs::directory_iterator(dir))
    if (is_shard_name(entry.path().filename().string()) && (own_dir || is_corpus_file(entry.path())))
      files.push_back(entry.path());
  std::sort(files.begin() + 1, files.end());  // meta.json first (publish)
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

// Writes the word-start table, then swaps the staged files into `out` and writes meta.json last.
void publish(core::StagingDir& staging_dir, const fs::path& out, const Tokenizer& tok, const TokenFormat& token_format,
             const PrepareOptions& options, const std::vector<std::string>& files, const WrittenShards& written) {
  const fs::path& staging = staging_dir.path();
  // Word-start flags for whole-word masking, so the loader needs no tokenizer.
  BinaryWriter words(staging / format::kWordStartsFile);
  const std::vector<uint8_t> word_starts = tok.word_start_table();
  words.write(word_starts.data(), word_starts.size());
  words.close(make_header(format::kWordMagic, 1, static_cast<uint64_t>(token_format.vocab), 0, token_format.vocab, token_format.fingerprint, 0));

  // Everything that can fail but a rename happens first, in staging: meta.json is serialized and
  // written there (file names that are not UTF-8 escaped: JSON holds text), so a failure leaves the
  // old corpus in `out` exactly as it was.
  nlohmann::json meta;
  meta["format"] = "roformer-prepared";
  meta["version"] = format::kVersion;
  meta["tokenizer_fingerprint"] = token_format.fingerprint;
  meta["tokenizer_model"] = core::utf8_or_escaped(fs::absolute(options.tokenizer_model).string());
  meta["vocab_size"] = token_format.vocab;
  // The roles the loader puts in every sequence and masks with, and the ids it never masks or draws.
  const SpecialTokens& special = tok.special_tokens();
  const auto role = [](int32_t id) { return id < 0 ? nlohmann::json(nullptr) : nlohmann::json(id); };
  meta["special_tokens"] = {{"pad", role(special.pad)}, {"unk", role(special.unk)}, {"cls", role(special.cls)},
                            {"sep", role(special.sep)}, {"mask", role(special.mask)}};
  meta["special_ids"] = tok.special_ids();
  meta["token_bytes"] = token_format.token_bytes;
  meta["num_documents"] = written.stats.documents;
  meta["num_tokens"] = written.stats.tokens;
  meta["inputs"] = nlohmann::json::array();
  for (const auto& f : files) meta["inputs"].push_back(core::utf8_or_escaped(f));
  meta["shards"] = nlohmann::json::array();
  for (size_t s = 0; s < written.shard_tokens.size(); ++s)
    meta["shards"].push_back({{"file", shard_name(static_cast<int64_t>(s))}, {"tokens", written.shard_tokens[s]},
                              {"documents", written.shard_docs[s]}});
  core::write_file_checked((staging / format::kMetaFile).string(), meta.dump(2) + "\n");

  // Swap in, renames only: first remove the old meta.json so the directory never looks complete
  // with mixed files (old_corpus_files lists it first), then the old corpus's files, then the new
  // ones, meta.json last.
  std::vector<std::string> names;
  for (size_t s = 0; s < written.shard_tokens.size(); ++s) names.push_back(shard_name(static_cast<int64_t>(s)));
  for (const char* name : {format::kIndexFile, format::kWordStartsFile, format::kMetaFile}) names.push_back(name);
  staging_dir.publish(old_corpus_files(out, options.own_out_dir), names);
}

// meta.json of a corpus `prepare` wrote (not merely a file of that name).
bool holds_prepared_corpus(const fs::path& dir) {
  try {
    const auto meta = nlohmann::json::parse(core::read_file((dir / format::kMetaFile).string(), "meta.json"));
    return meta.is_object() && meta.value("format", "") == "roformer-prepared";
  } catch (const std::exception&) {
    return false;
  }
}

// Refuses, before anything is written, an --out that would mix with or replace what it holds:
// PrepareOptions::force.
void check_out_dir(const fs::path& out, const PrepareOptions& options) {
  if (options.own_out_dir) return;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kStagingPrefix, 0) != 0) names.push_back(name);  // an interrupted prepare's own folder
  }
  if (names.empty()) return;
  if (holds_prepared_corpus(out)) {
    if (options.force) return;
    throw Error(fmt::format("--out {} already holds a prepared corpus; pass --force to replace it (it stays intact "
                            "until the new one is complete), or choose a new directory", options.out_dir));
  }
  // Only files of a prepared corpus, its meta.json gone (a replacement killed outright between the
  // removal of the old meta.json and the rename of the new one): a corpus of ours all the same.
  if (std::all_of(names.begin(), names.end(), [&](const std::string& name) { return is_corpus_file(out / name); })) {
    if (options.force) return;
    throw Error(fmt::format("--out {} holds a prepared corpus without its meta.json (an interrupted prepare?), which "
                            "cannot be read; pass --force to replace it, or choose a new directory", options.out_dir));
  }
  throw Error(fmt::format("--out {} is not empty and holds no prepared corpus ({}); prepare writes meta.json, "
                          "documents.idx and shard files there and would replace files of those names: choose a new "
                          "or empty directory", options.out_dir, core::listed_names(names)));
}

// The files read, encoded by `threads` encoders and written as shards into the staging folder (one
// writer thread); a failure anywhere aborts the staging (the error names it).
void encode_files(const std::vector<std::string>& files, const Tokenizer& tok, const TokenFormat& token_format,
                  const PrepareOptions& options, int64_t threads, int64_t total_bytes, Staging& staging,
                  WrittenShards& written) {
  ChunkQueue queue(2 * threads + 2);
  try {
    EncoderPool encoders(tok, options.text_field, queue, threads);
    std::thread writer;
    try {
      writer = std::thread([&] {
        write_chunks(queue, staging.dir(), token_format, options, static_cast<int64_t>(files.size()), total_bytes, written);
      });
    } catch (const std::system_error& e) {
      queue.fail(e.what());  // the encoders stop; the pool's destructor joins them
      throw Error(fmt::format("cannot start the shard-writing thread: {}; lower --threads", e.what()));
    }
    read_chunks(files, options, queue);
    encoders.join();
    writer.join();
  } catch (const Error& e) {
    staging.abort(e.what());
  }
  if (queue.failed()) staging.abort(queue.error());
}

}  // namespace

PrepareStats prepare_corpus(const PrepareOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> files = expand_inputs(options.inputs);
  if (options.out_dir.empty()) throw Error("no output directory given (--out DIR)");
  const Tokenizer tok = Tokenizer::load(options.tokenizer_model);
  tok.check_mlm_roles();  // prepared data is for masked-language-model training
  const TokenFormat token_format{tok.vocab_size() < 65536 ? 2u : 4u, tok.vocab_size(), tok.fingerprint()};
  if (options.num_threads < 0 || options.num_threads > kMaxPrepareThreads)
    throw Error(fmt::format("--threads {} is out of range: give 1 to {} encoding threads, or 0 for one a core",
                            options.num_threads, kMaxPrepareThreads));
  const int64_t threads = options.num_threads > 0 ? options.num_threads : std::max(1u, std::thread::hardware_concurrency());
  int64_t total_bytes = 0;
  for (const auto& p : files) total_bytes += static_cast<int64_t>(fs::file_size(p));

  const fs::path out(options.out_dir);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw Error("--out " + options.out_dir + " exists and is not a directory; choose a new directory");
  const core::OutputDirClaim claim(out, "--out");  // one prepare into it at a time
  check_out_dir(out, options);
  Staging staging(out);

  WrittenShards written;
  encode_files(files, tok, token_format, options, threads, total_bytes, staging, written);
  if (written.stats.documents == 0) {
    std::string names;
    for (const auto& p : options.inputs) names += (names.empty() ? "" : ", ") + p;
    staging.abort("the corpus is empty: no text in " + names + " (plain text: one paragraph a line; JSONL and "
                               "Parquet: the \"" + options.text_field + "\" field)");
  }
  try {
    publish(staging.staging_dir(), out, tok, token_format, options, files, written);
  } catch (const Error& e) {
    staging.abort(e.what());
  } catch (const fs::filesystem_error& e) {
    staging.abort(std::string("cannot write the prepared corpus: ") + e.what());
  }
  PrepareStats stats = written.stats;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double secs = std::max(1e-9, stats.seconds);
  spdlog::info("prepare: {} documents, {} tokens from {} file(s), {:.1f} MB ({:.1f} MB of text) in {:.1f}s ({:.1f} MB/s of "
               "text, {:.2f}M tokens/s, {} threads) -> {}", stats.documents, stats.tokens, files.size(), stats.bytes / 1e6,
               stats.text_bytes / 1e6, stats.seconds, stats.text_bytes / 1e6 / secs, stats.tokens / 1e6 / secs, threads,
               options.out_dir);
  return stats;
}

}  // namespace roformer::data
