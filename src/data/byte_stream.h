// Streaming reads of an input file that may be compressed: gzip (zlib) or zstd (libzstd), chosen by
// the file's first bytes, never by its name. Decompression is streamed through fixed buffers, so
// memory does not depend on the file size and nothing is written to disk. A corrupt or truncated
// stream is a roformer::Error naming the file and how far it got.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace roformer::data {

enum class Compression { kNone, kGzip, kZstd };

// "gzip", "zstd" or "none".
const char* compression_name(Compression c);

// The compression of `head`, the first bytes of a file (gzip: 1f 8b; zstd: 28 b5 2f fd).
Compression compression_of(const std::string& head);

// The first `n` bytes of a file (fewer when it is shorter). Throws roformer::Error when unreadable.
std::string read_head(const std::string& path, size_t n);

// The decompressed bytes of a file, in order.
class ByteStream {
 public:
  explicit ByteStream(const std::string& path);
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Up to `n` bytes of content into `out`; 0 only at the end of the content. Throws roformer::Error
  // on a read error or a corrupt or truncated compressed stream.
  size_t read(char* out, size_t n);
  Compression compression() const;
  // Bytes of the file consumed so far (read ahead by at most one buffer), and content bytes served.
  int64_t file_bytes() const;
  int64_t content_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Where to cut `text` (longer than `max_bytes`) so that its first piece, text[0, cut), holds at
// most `max_bytes`: before the last space within reach (SentencePiece splits its input at spaces and
// drops the spaces at either end, so the pieces encode to the tokens of the whole), else at the last
// UTF-8 character boundary within reach (only there may the tokens differ). Always 0 < cut <= max_bytes.
size_t text_cut(std::string_view text, size_t max_bytes);

// Lines of a ByteStream, without their '\n'.
class LineReader {
 public:
  explicit LineReader(const std::string& path) : stream_(path) {}
  // The next line into `line`; false at the end. A last line without '\n' is still a line.
  bool next(std::string& line);
  // The next piece of a line into `piece`, holding at most `max_bytes` (max_bytes >= 4): the rest of
  // the line when it fits (`line_ends` true), else a piece cut by text_cut (`line_ends` false). Memory
  // stays within max_bytes plus the read buffer, however long the line. False at the end.
  bool next_piece(std::string& piece, size_t max_bytes, bool& line_ends);
  const ByteStream& stream() const { return stream_; }

 private:
  ByteStream stream_;
  std::string buffer_;
  size_t pos_ = 0;   // first unread byte of buffer_
  bool end_ = false;
};

}  // namespace roformer::data
