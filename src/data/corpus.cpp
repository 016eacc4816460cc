// Corpus preparation: a reader thread groups documents into text chunks, N workers encode chunks,
// and a writer appends the results in chunk order (so the bytes written do not depend on the thread
// count) to shards in a staging directory; the finished files are moved into place and meta.json is
// written last. PreparedCorpus maps the files read-only.
#include "data/corpus.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "data/text_reader.h"
#include "data/tokenizer.h"

namespace roformer::data {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kFormatVersion = 1;
constexpr char kShardMagic[8] = {'R', 'F', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr char kIndexMagic[8] = {'R', 'F', 'D', 'O', 'C', 'I', 'D', 'X'};
constexpr char kWordMagic[8] = {'R', 'F', 'W', 'O', 'R', 'D', 'S', 'T'};
constexpr size_t kChunkBytes = 256 * 1024;  // text per work item

// The 64-byte header at the start of every binary file (little-endian).
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t dtype_bytes;    // bytes per element: 2/4 for token ids, 8 for offsets, 1 for flags
  uint64_t count;          // elements after the header
  uint64_t num_documents;  // documents covered by this file
  uint64_t vocab_size;
  char fingerprint[16];    // tokenizer fingerprint, 16 hex digits
  uint32_t shard_index;
  uint32_t reserved;
};
static_assert(sizeof(FileHeader) == 64, "header layout is part of the file format");

FileHeader make_header(const char (&magic)[8], uint32_t dtype_bytes, uint64_t count, uint64_t docs, uint64_t vocab,
                       const std::string& fingerprint, uint32_t shard_index) {
  FileHeader h{};
  std::memcpy(h.magic, magic, 8);
  h.version = kFormatVersion;
  h.dtype_bytes = dtype_bytes;
  h.count = count;
  h.num_documents = docs;
  h.vocab_size = vocab;
  std::memcpy(h.fingerprint, fingerprint.data(), std::min<size_t>(16, fingerprint.size()));
  h.shard_index = shard_index;
  return h;
}

std::string shard_name(int64_t index) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard_%05lld.tok", static_cast<long long>(index));
  return name;
}

// Appends elements to a file after a header that is rewritten with the final count on close; the
// file carries a .tmp suffix until then.
class BinaryWriter {
 public:
  BinaryWriter(const fs::path& path) : path_(path), tmp_(path.string() + ".tmp"), out_(tmp_, std::ios::binary | std::ios::trunc) {
    if (!out_) throw Error("cannot create " + tmp_ + " (no permission or disk full?)");
    FileHeader blank{};
    out_.write(reinterpret_cast<const char*>(&blank), sizeof(blank));
  }
  void write(const void* data, size_t bytes) { out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes)); }
  void close(const FileHeader& header) {
    out_.seekp(0);
    out_.write(reinterpret_cast<const char*>(&header), sizeof(header));
    out_.close();
    if (!out_) throw Error("cannot write " + tmp_ + " (disk full?)");
    fs::rename(tmp_, path_);
  }

 private:
  fs::path path_;
  std::string tmp_;
  std::ofstream out_;
};

struct Chunk {
  int64_t id = 0;
  std::vector<std::vector<std::string>> docs;  // paragraphs of each document
  int64_t input_bytes = 0;
  std::vector<int32_t> tokens;                 // encoded, documents concatenated
  std::vector<int64_t> lengths;                // tokens per non-empty document
};

class Progress {
 public:
  Progress(bool enabled, int64_t total_bytes)
      : enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0), total_(total_bytes), start_(clock::now()), last_(start_) {}
  void update(int64_t bytes, int64_t tokens, bool final = false) {
    if (!enabled_) return;
    const auto now = clock::now();
    const double since_last = std::chrono::duration<double>(now - last_).count();
    if (!final && since_last < (tty_ ? 0.25 : 10.0)) return;
    last_ = now;
    const double secs = std::max(1e-9, std::chrono::duration<double>(now - start_).count());
    const double frac = total_ > 0 ? std::min(1.0, static_cast<double>(bytes) / total_) : 1.0;
    const double mbs = bytes / 1e6 / secs, tps = tokens / secs;
    const double eta = frac > 0 ? secs * (1 - frac) / frac : 0;
    if (tty_) {
      const int width = 30, filled = static_cast<int>(frac * width);
      std::fprintf(stderr, "\r[%s%s] %5.1f%% %.1f MB/s %.2fM tok/s ETA %.0fs ", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), 100 * frac, mbs, tps / 1e6, eta);
      if (final) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    } else {
      spdlog::info("prepare: {:.1f}% {:.1f} MB/s {:.2f}M tokens/s ETA {:.0f}s", 100 * frac, mbs, tps / 1e6, eta);
    }
  }

 private:
  using clock = std::chrono::steady_clock;
  bool enabled_, tty_;
  int64_t total_;
  clock::time_point start_, last_;
};

}  // namespace

PrepareStats prepare_corpus(const PrepareOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  check_inputs_exist(options.inputs);
  if (options.out_dir.empty()) throw Error("no output directory given (--out DIR)");
  const Tokenizer tok = Tokenizer::load(options.tokenizer_model);
  const int64_t vocab = tok.vocab_size();
  const uint32_t token_bytes = vocab < 65536 ? 2 : 4;
  const int64_t threads = options.num_threads > 0 ? options.num_threads : std::max(1u, std::thread::hardware_concurrency());
  int64_t total_bytes = 0;
  for (const auto& p : options.inputs) total_bytes += static_cast<int64_t>(fs::file_size(p));

  const fs::path out(options.out_dir);
  if (fs::exists(out) && !fs::is_directory(out)) throw Error("--out " + options.out_dir + " exists and is not a directory");
  fs::create_directories(out);
  // Staging folders of runs that were killed (their process is gone) are removed; a live run's is kept.
  const std::string staging_prefix = ".prepare-staging-";
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(staging_prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + staging_prefix.size(), nullptr, 10);
    if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) fs::remove_all(entry.path());
  }
  const fs::path staging = out / (staging_prefix + std::to_string(::getpid()));
  fs::remove_all(staging);
  fs::create_directories(staging);

  // Shared state of the pipeline. in_flight bounds memory: the reader waits while that many chunks
  // are queued, being encoded, or waiting for the writer.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Chunk>> work;
  std::map<int64_t, std::unique_ptr<Chunk>> done;
  const int64_t max_in_flight = 2 * threads + 2;
  int64_t in_flight = 0;
  bool reading_finished = false, failed = false;
  int64_t chunks_total = -1;
  std::string error_message;
  auto fail = [&](const std::string& message) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed) error_message = message;
    failed = true;
    cv.notify_all();
  };

  std::vector<std::thread> workers;
  for (int64_t w = 0; w < threads; ++w) {
    workers.emplace_back([&] {
      for (;;) {
        std::unique_ptr<Chunk> chunk;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return failed || !work.empty() || reading_finished; });
          if (failed || work.empty()) return;
          chunk = std::move(work.front());
          work.pop_front();
        }
        try {
          for (const auto& doc : chunk->docs) {
            const size_t before = chunk->tokens.size();
            for (const auto& para : doc) {
              const auto ids = tok.encode(para);
              chunk->tokens.insert(chunk->tokens.end(), ids.begin(), ids.end());
            }
            const int64_t len = static_cast<int64_t>(chunk->tokens.size() - before);
            if (len > 0) chunk->lengths.push_back(len);
          }
          chunk->docs.clear();
        } catch (const std::exception& e) {
          fail(e.what());
          return;
        }
        std::lock_guard<std::mutex> lock(mu);
        done.emplace(chunk->id, std::move(chunk));
        cv.notify_all();
      }
    });
  }

  // The writer consumes chunks strictly in id order.
  PrepareStats stats;
  std::vector<int64_t> shard_tokens_list, shard_docs_list;
  std::thread writer([&] {
    try {
      Progress progress(options.progress, total_bytes);
      BinaryWriter index(staging / "documents.idx");
      uint64_t offset = 0;
      index.write(&offset, sizeof(offset));
      std::unique_ptr<BinaryWriter> shard;
      int64_t shard_tokens = 0, shard_docs = 0;
      std::vector<uint8_t> buffer;
      auto close_shard = [&] {
        shard->close(make_header(kShardMagic, token_bytes, shard_tokens, shard_docs, vocab, tok.fingerprint(),
                                 static_cast<uint32_t>(shard_tokens_list.size())));
        shard_tokens_list.push_back(shard_tokens);
        shard_docs_list.push_back(shard_docs);
        shard.reset();
        shard_tokens = shard_docs = 0;
      };
      for (int64_t next = 0;; ++next) {
        std::unique_ptr<Chunk> chunk;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return failed || done.count(next) || (chunks_total >= 0 && next >= chunks_total); });
          if (failed) return;
          if (!done.count(next)) break;
          chunk = std::move(done[next]);
          done.erase(next);
        }
        int64_t pos = 0;
        for (const int64_t len : chunk->lengths) {
          if (shard && shard_tokens > 0 && shard_tokens + len > options.shard_tokens) close_shard();
          if (!shard) shard = std::make_unique<BinaryWriter>(staging / shard_name(static_cast<int64_t>(shard_tokens_list.size())));
          buffer.resize(static_cast<size_t>(len) * token_bytes);
          for (int64_t k = 0; k < len; ++k) {
            const uint32_t id = static_cast<uint32_t>(chunk->tokens[pos + k]);
            if (token_bytes == 2) {
              const uint16_t v = static_cast<uint16_t>(id);
              std::memcpy(&buffer[k * 2], &v, 2);
            } else {
              std::memcpy(&buffer[k * 4], &id, 4);
            }
          }
          shard->write(buffer.data(), buffer.size());
          pos += len;
          shard_tokens += len;
          ++shard_docs;
          offset += static_cast<uint64_t>(len);
          index.write(&offset, sizeof(offset));
          ++stats.documents;
        }
        stats.tokens += pos;
        stats.bytes += chunk->input_bytes;
        progress.update(stats.bytes, stats.tokens);
        std::lock_guard<std::mutex> lock(mu);
        --in_flight;
        cv.notify_all();
      }
      if (shard) close_shard();
      index.close(make_header(kIndexMagic, 8, stats.documents + 1, stats.documents, vocab, tok.fingerprint(), 0));
      progress.update(stats.bytes, stats.tokens, true);
    } catch (const std::exception& e) {
      fail(e.what());
    }
  });

  // The reader (this thread).
  try {
    int64_t chunk_id = 0;
    auto chunk = std::make_unique<Chunk>();
    size_t chunk_bytes = 0;
    auto submit = [&] {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return failed || in_flight < max_in_flight; });
      if (failed) return false;
      chunk->id = chunk_id++;
      ++in_flight;
      work.push_back(std::move(chunk));
      cv.notify_all();
      chunk = std::make_unique<Chunk>();
      chunk_bytes = 0;
      return true;
    };
    bool ok = true;
    for (const auto& path : options.inputs) {
      DocumentReader reader(path, options.jsonl_field);
      std::vector<std::string> paragraphs;
      int64_t last_bytes = 0;
      while (ok && reader.next(paragraphs)) {
        for (const auto& p : paragraphs) chunk_bytes += p.size() + 1;
        chunk->input_bytes += reader.bytes_read() - last_bytes;
        last_bytes = reader.bytes_read();
        chunk->docs.push_back(std::move(paragraphs));
        paragraphs = {};
        if (chunk_bytes >= kChunkBytes) ok = submit();
      }
      chunk->input_bytes += reader.bytes_read() - last_bytes;
      if (!ok) break;
    }
    if (ok && !chunk->docs.empty()) submit();
    std::lock_guard<std::mutex> lock(mu);
    chunks_total = chunk_id;
    reading_finished = true;
    cv.notify_all();
  } catch (const std::exception& e) {
    fail(e.what());
    std::lock_guard<std::mutex> lock(mu);
    reading_finished = true;
    cv.notify_all();
  }
  for (auto& w : workers) w.join();
  writer.join();

  auto abort_with = [&](const std::string& message) -> PrepareStats {
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw Error(message);
  };
  if (failed) return abort_with(error_message);
  if (stats.documents == 0) {
    std::string names;
    for (const auto& p : options.inputs) names += (names.empty() ? "" : ", ") + p;
    return abort_with("the corpus is empty: no text in " + names + " (plain text: one paragraph a line; JSONL: the \"" +
                      options.jsonl_field + "\" field)");
  }

  try {
    // Word-start flags for whole-word masking, so the loader needs no tokenizer.
    BinaryWriter words(staging / "word_starts.bin");
    words.write(tok.word_start_table().data(), tok.word_start_table().size());
    words.close(make_header(kWordMagic, 1, static_cast<uint64_t>(vocab), 0, vocab, tok.fingerprint(), 0));

    // Swap in: first remove the old meta.json so the directory never looks complete with mixed files.
    fs::remove(out / "meta.json");
    for (const auto& entry : fs::directory_iterator(out)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("shard_", 0) == 0 || name == "documents.idx" || name == "word_starts.bin") fs::remove(entry.path());
    }
    nlohmann::json meta;
    meta["format"] = "roformer-prepared";
    meta["version"] = kFormatVersion;
    meta["tokenizer_fingerprint"] = tok.fingerprint();
    meta["tokenizer_model"] = fs::absolute(options.tokenizer_model).string();
    meta["vocab_size"] = vocab;
    meta["token_bytes"] = token_bytes;
    meta["num_documents"] = stats.documents;
    meta["num_tokens"] = stats.tokens;
    meta["inputs"] = options.inputs;
    meta["shards"] = nlohmann::json::array();
    for (size_t s = 0; s < shard_tokens_list.size(); ++s) {
      fs::rename(staging / shard_name(static_cast<int64_t>(s)), out / shard_name(static_cast<int64_t>(s)));
      meta["shards"].push_back({{"file", shard_name(static_cast<int64_t>(s))}, {"tokens", shard_tokens_list[s]},
                                {"documents", shard_docs_list[s]}});
    }
    fs::rename(staging / "documents.idx", out / "documents.idx");
    fs::rename(staging / "word_starts.bin", out / "word_starts.bin");
    {
      std::ofstream m(out / "meta.json.tmp");
      m << meta.dump(2) << "\n";
      if (!m) throw Error("cannot write " + (out / "meta.json.tmp").string());
    }
    fs::rename(out / "meta.json.tmp", out / "meta.json");
    fs::remove_all(staging);
  } catch (const fs::filesystem_error& e) {
    return abort_with(std::string("cannot write the prepared corpus: ") + e.what());
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("prepare: {} documents, {} tokens from {:.1f} MB in {:.1f}s ({:.1f} MB/s, {} threads) -> {}", stats.documents,
               stats.tokens, stats.bytes / 1e6, stats.seconds, stats.bytes / 1e6 / std::max(1e-9, stats.seconds), threads,
               options.out_dir);
  return stats;
}

// ---- Reading -----------------------------------------------------------------------------------

namespace {

struct MappedFile {
  void* base = nullptr;
  size_t size = 0;
  FileHeader header{};
};

// Maps a file and checks its header: magic, version, fingerprint and that the size matches the
// element count (a truncated file is an error, never read past).
MappedFile map_checked(const fs::path& path, const char (&magic)[8], uint32_t dtype_bytes, const std::string& fingerprint) {
  const std::string p = path.string();
  const std::string hint = "; re-run `roformer prepare` into " + path.parent_path().string();
  const int fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) throw Error("prepared corpus file missing: " + p + hint);
  struct stat st {};
  ::fstat(fd, &st);
  MappedFile f;
  f.size = static_cast<size_t>(st.st_size);
  if (f.size < sizeof(FileHeader)) {
    ::close(fd);
    throw Error("prepared corpus file " + p + " is truncated (" + std::to_string(f.size) + " bytes, shorter than its header)" + hint);
  }
  f.base = ::mmap(nullptr, f.size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (f.base == MAP_FAILED) throw Error("cannot map " + p + ": " + std::strerror(errno));
  std::memcpy(&f.header, f.base, sizeof(FileHeader));
  auto fail = [&](const std::string& what) {
    ::munmap(f.base, f.size);
    throw Error("prepared corpus file " + p + " " + what + hint);
  };
  if (std::memcmp(f.header.magic, magic, 8) != 0) fail("is not a roformer prepared file (bad magic)");
  if (f.header.version != kFormatVersion)
    fail("has format version " + std::to_string(f.header.version) + ", this build reads " + std::to_string(kFormatVersion));
  const std::string file_fp(f.header.fingerprint, 16);
  if (file_fp != fingerprint)
    fail("was encoded with tokenizer " + file_fp + " but the directory's meta.json says " + fingerprint +
         " (files from different prepare runs are mixed)");
  if (f.header.dtype_bytes != dtype_bytes)
    fail("has " + std::to_string(f.header.dtype_bytes) + "-byte elements, expected " + std::to_string(dtype_bytes) +
         " (corrupt header)");
  const uint64_t payload = f.size - sizeof(FileHeader);
  if (f.header.count != payload / dtype_bytes || payload % dtype_bytes != 0)
    fail("is truncated or corrupt: " + std::to_string(f.size) + " bytes, its header promises " +
         std::to_string(f.header.count) + " elements of " + std::to_string(dtype_bytes) + " bytes after the header");
  return f;
}

}  // namespace

PreparedCorpus::~PreparedCorpus() {
  for (auto& s : shards_)
    if (s.map.base) ::munmap(s.map.base, s.map.size);
  if (index_map_.base) ::munmap(index_map_.base, index_map_.size);
  if (word_map_.base) ::munmap(word_map_.base, word_map_.size);
}

std::shared_ptr<const PreparedCorpus> PreparedCorpus::open(const std::string& dir, const std::string& expected_fingerprint) {
  const fs::path root(dir);
  const fs::path meta_path = root / "meta.json";
  if (!fs::exists(meta_path))
    throw Error("no prepared corpus in " + dir + " (meta.json missing: prepare was never run there or did not finish); run `roformer prepare`");
  nlohmann::json meta;
  try {
    std::ifstream in(meta_path);
    meta = nlohmann::json::parse(in);
    if (meta.at("format") != "roformer-prepared") throw Error("not a roformer meta.json");
  } catch (const std::exception& e) {
    throw Error("cannot read " + meta_path.string() + ": " + e.what() + "; re-run `roformer prepare`");
  }
  std::shared_ptr<PreparedCorpus> c(new PreparedCorpus());
  c->dir_ = dir;
  try {
    c->fingerprint_ = meta.at("tokenizer_fingerprint").get<std::string>();
    c->vocab_size_ = meta.at("vocab_size").get<int64_t>();
    c->num_documents_ = meta.at("num_documents").get<int64_t>();
    c->num_tokens_ = meta.at("num_tokens").get<int64_t>();
    c->token_bytes_ = meta.at("token_bytes").get<int>();
    if (!meta.at("shards").is_array()) throw Error("\"shards\" is not a list");
    for (const auto& shard : meta.at("shards")) {
      shard.at("file").get<std::string>();
      shard.at("tokens").get<int64_t>();
    }
  } catch (const std::exception& e) {
    throw Error("corrupt " + meta_path.string() + ": " + e.what() + "; re-run `roformer prepare`");
  }
  if (c->token_bytes_ != 2 && c->token_bytes_ != 4)
    throw Error("corrupt " + meta_path.string() + ": token_bytes is " + std::to_string(c->token_bytes_) +
                " (2 or 4 expected); re-run `roformer prepare`");
  if (c->vocab_size_ < Tokenizer::kNumSpecial || c->vocab_size_ > (int64_t{1} << (8 * c->token_bytes_)) ||
      c->num_documents_ < 0 || c->num_tokens_ < 0)
    throw Error("corrupt " + meta_path.string() + ": vocab_size, num_documents or num_tokens is out of range; "
                "re-run `roformer prepare`");
  if (!expected_fingerprint.empty() && expected_fingerprint != c->fingerprint_)
    throw Error("the prepared corpus in " + dir + " was encoded with tokenizer " + c->fingerprint_ +
                ", but the tokenizer in use has fingerprint " + expected_fingerprint +
                "; re-run `roformer prepare` with this tokenizer (or use the tokenizer it was prepared with)");

  const MappedFile index = map_checked(root / "documents.idx", kIndexMagic, 8, c->fingerprint_);
  c->index_map_ = {index.base, index.size};
  c->offsets_ = reinterpret_cast<const uint64_t*>(static_cast<const uint8_t*>(index.base) + sizeof(FileHeader));
  if (static_cast<int64_t>(index.header.count) != c->num_documents_ + 1 ||
      static_cast<int64_t>(c->offsets_[c->num_documents_]) != c->num_tokens_)
    throw Error("document index in " + dir + " disagrees with meta.json; re-run `roformer prepare`");
  const MappedFile words = map_checked(root / "word_starts.bin", kWordMagic, 1, c->fingerprint_);
  c->word_map_ = {words.base, words.size};
  c->word_starts_ = static_cast<const uint8_t*>(words.base) + sizeof(FileHeader);
  if (static_cast<int64_t>(words.header.count) != c->vocab_size_)
    throw Error("word_starts.bin in " + dir + " disagrees with meta.json; re-run `roformer prepare`");

  int64_t first = 0;
  for (const auto& s : meta.at("shards")) {
    const std::string name = s.at("file").get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
      throw Error("corrupt " + meta_path.string() + ": shard name '" + name + "' is not a file name in " + dir +
                  "; re-run `roformer prepare`");
    const MappedFile f = map_checked(root / name, kShardMagic, static_cast<uint32_t>(c->token_bytes_), c->fingerprint_);
    Shard shard;
    shard.map = {f.base, f.size};
    shard.tokens = static_cast<const uint8_t*>(f.base) + sizeof(FileHeader);
    shard.first_token = first;
    shard.num_tokens = static_cast<int64_t>(f.header.count);
    c->shards_.push_back(shard);  // owned from here on (unmapped by the destructor)
    if (shard.num_tokens != s.at("tokens").get<int64_t>())
      throw Error("shard " + (root / name).string() + " disagrees with meta.json; re-run `roformer prepare`");
    c->check_token_ids(c->shards_.back(), (root / name).string());
    first += shard.num_tokens;
  }
  if (first != c->num_tokens_) throw Error("the shards in " + dir + " hold fewer tokens than meta.json says; re-run `roformer prepare`");
  c->check_document_index();
  return c;
}

// Every id below vocab_size: checked once here, so a damaged shard is named when the corpus is
// opened instead of failing inside a training step (the embedding lookup) hours later.
void PreparedCorpus::check_token_ids(const Shard& shard, const std::string& path) const {
  int64_t bad = -1;
  uint32_t id = 0;
  const auto limit = static_cast<uint64_t>(vocab_size_);
  if (token_bytes_ == 2) {
    const auto* p = reinterpret_cast<const uint16_t*>(shard.tokens);
    for (int64_t k = 0; k < shard.num_tokens && bad < 0; ++k)
      if (p[k] >= limit) bad = k, id = p[k];
  } else {
    const auto* p = reinterpret_cast<const uint32_t*>(shard.tokens);
    for (int64_t k = 0; k < shard.num_tokens && bad < 0; ++k)
      if (p[k] >= limit) bad = k, id = p[k];
  }
  if (bad >= 0)
    throw Error("shard " + path + " holds token id " + std::to_string(id) + " at token " + std::to_string(bad) +
                ", beyond the vocabulary of " + std::to_string(vocab_size_) + " ids in " + dir_ +
                "/meta.json: the shard is damaged or was written for another tokenizer; re-run `roformer prepare`");
}

// Offsets start at 0, never decrease, end at num_tokens, and no document crosses a shard boundary
// (copy_tokens reads a document from one shard).
void PreparedCorpus::check_document_index() const {
  const std::string hint = "; re-run `roformer prepare` into " + dir_;
  if (offsets_[0] != 0) throw Error("document index in " + dir_ + " does not start at token 0" + hint);
  size_t shard = 0;
  for (int64_t i = 0; i < num_documents_; ++i) {
    const uint64_t begin = offsets_[i], end = offsets_[i + 1];
    if (end < begin || end > static_cast<uint64_t>(num_tokens_))
      throw Error("document index in " + dir_ + " is corrupt at document " + std::to_string(i) + hint);
    while (shard < shards_.size() &&
           begin >= static_cast<uint64_t>(shards_[shard].first_token + shards_[shard].num_tokens))
      ++shard;
    if (end > begin && (shard == shards_.size() ||
                        end > static_cast<uint64_t>(shards_[shard].first_token + shards_[shard].num_tokens)))
      throw Error("document index in " + dir_ + ": document " + std::to_string(i) + " crosses a shard boundary" + hint);
  }
}

const PreparedCorpus::Shard& PreparedCorpus::shard_of(int64_t token) const {
  if (shards_.size() == 1) return shards_[0];
  auto it = std::upper_bound(shards_.begin(), shards_.end(), token,
                             [](int64_t t, const Shard& s) { return t < s.first_token; });
  return *(it - 1);
}

int64_t PreparedCorpus::document_at(int64_t token) const {
  const uint64_t* end = offsets_ + num_documents_ + 1;
  const uint64_t* it = std::upper_bound(offsets_, end, static_cast<uint64_t>(token));
  return static_cast<int64_t>(it - offsets_) - 1;
}

void PreparedCorpus::copy_tokens(int64_t doc, int64_t offset, int64_t count, int64_t* out) const {
  const int64_t start = static_cast<int64_t>(offsets_[doc]) + offset;
  const Shard& s = shard_of(start);  // documents never cross shards
  const int64_t local = start - s.first_token;
  if (token_bytes_ == 2) {
    const auto* p = reinterpret_cast<const uint16_t*>(s.tokens) + local;
    for (int64_t k = 0; k < count; ++k) out[k] = p[k];
  } else {
    const auto* p = reinterpret_cast<const uint32_t*>(s.tokens) + local;
    for (int64_t k = 0; k < count; ++k) out[k] = p[k];
  }
}

void PreparedCorpus::append_document(int64_t i, std::vector<int32_t>& out) const {
  if (i < 0 || i >= num_documents_) throw Error("document " + std::to_string(i) + " out of range");
  const int64_t len = document_length(i);
  std::vector<int64_t> tmp(static_cast<size_t>(len));
  copy_tokens(i, 0, len, tmp.data());
  out.insert(out.end(), tmp.begin(), tmp.end());
}

std::vector<int32_t> PreparedCorpus::document(int64_t i) const {
  std::vector<int32_t> out;
  append_document(i, out);
  return out;
}

bool is_prepared_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "meta.json", ec);
}

}  // namespace roformer::data
