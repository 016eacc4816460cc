// Plain, gzip and zstd input streams (see byte_stream.h). One input buffer of kBufferBytes; zlib's
// and libzstd's streaming decoders write straight into the caller's buffer.
#include "data/byte_stream.h"

#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace roformer::data {

namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;
// The largest zstd window decoded: libzstd's default limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT, what `zstd
// --long` without a number uses), 128 MiB of decoder memory at most.
constexpr int kMaxZstdWindowLog = 27;

}  // namespace

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kGzip: return "gzip";
    case Compression::kZstd: return "zstd";
    default: return "none";
  }
}

Compression compression_of(const std::string& head) {
  if (head.size() >= 2 && head.compare(0, 2, "\x1f\x8b") == 0) return Compression::kGzip;
  if (head.size() >= 4 && head.compare(0, 4, "\x28\xb5\x2f\xfd") == 0) return Compression::kZstd;
  return Compression::kNone;
}

std::string read_head(const std::string& path, size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(fmt::format("cannot open input file {}: {} (check that it exists and is readable)", path,
                                  std::strerror(errno)));
  std::string head(n, '\0');
  head.resize(std::fread(head.data(), 1, n, f));
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) throw Error(fmt::format("cannot read input file {}", path));
  return head;
}

struct ByteStream::Impl {
  std::string path;
  std::FILE* file = nullptr;
  Compression compression = Compression::kNone;
  std::vector<char> in = std::vector<char>(kBufferBytes);
  size_t in_pos = 0, in_len = 0;  // unread input: in[in_pos, in_len)
  bool eof = false;
  int64_t file_read = 0, content = 0;
  z_stream gz{};
  bool gz_in_member = false;       // inside a gzip member (its end not yet decoded)
  ZSTD_DCtx* zstd = nullptr;
  size_t zstd_pending = 1;         // ZSTD_decompressStream's last hint: 0 once a frame is complete

  ~Impl() {
    if (compression == Compression::kGzip) inflateEnd(&gz);
    if (zstd) ZSTD_freeDCtx(zstd);
    if (file) std::fclose(file);
  }
  // Bytes of the file handed to the decoder so far.
  int64_t consumed() const { return file_read - static_cast<int64_t>(in_len - in_pos); }

  // Fills `in` when it is used up; false at the end of the file.
  bool refill() {
    if (in_pos < in_len) return true;
    if (eof) return false;
    in_len = std::fread(in.data(), 1, in.size(), file);
    in_pos = 0;
    if (std::ferror(file)) throw Error(fmt::format("cannot read input file {} after {} bytes: {}", path, file_read,
                                                   std::strerror(errno)));
    file_read += static_cast<int64_t>(in_len);
    if (in_len == 0) eof = true;
    return in_len > 0;
  }
  // `produced`: bytes decompressed by the read call under way (not yet in `content`).
  [[noreturn]] void corrupt(const std::string& detail, size_t produced) const {
    throw Error(fmt::format("{}: corrupt {} data after byte {} of the file, {} bytes decompressed ({}); the file is "
                            "damaged: download or copy it again", path, compression_name(compression), consumed(),
                            content + static_cast<int64_t>(produced), detail));
  }
  [[noreturn]] void truncated(size_t produced) const {
    throw Error(fmt::format("{}: the {} stream ends early, at byte {} of the file after {} decompressed bytes: the file "
                            "is truncated; download or copy it again", path, compression_name(compression), file_read,
                            content + static_cast<int64_t>(produced)));
  }

  size_t read_plain(char* out, size_t n) {
    size_t got = 0;
    while (got < n && refill()) {
      const size_t take = std::min(n - got, in_len - in_pos);
      std::memcpy(out + got, in.data() + in_pos, take);
      in_pos += take;
      got += take;
    }
    return got;
  }

  // After the last gzip member: true when nothing but zero bytes follow (padding that tape and block
  // tools add, which gzip itself ignores), consumed to the end; false at a byte that is not zero.
  bool only_zeros_remain() {
    while (refill()) {
      for (; in_pos < in_len; ++in_pos)
        if (in[in_pos] != 0) return false;
    }
    return true;
  }

  // Several gzip members one after another (pigz, bgzip, `cat a.gz b.gz`) are one stream; zero
  // bytes after the last one are padding.
  size_t read_gzip(char* out, size_t n) {
    gz.next_out = reinterpret_cast<Bytef*>(out);
    gz.avail_out = static_cast<uInt>(n);
    while (gz.avail_out > 0) {
      if (!refill()) {
        if (gz_in_member) truncated(n - gz.avail_out);
        break;
      }
      if (!gz_in_member) {  // a new member starts here, or zero padding ends the stream
        if (in[in_pos] == 0 && only_zeros_remain()) break;
        if (inflateReset(&gz) != Z_OK) corrupt("cannot reset the decoder", n - gz.avail_out);
        gz_in_member = true;
      }
      gz.next_in = reinterpret_cast<Bytef*>(in.data() + in_pos);
      gz.avail_in = static_cast<uInt>(in_len - in_pos);
      const int ret = inflate(&gz, Z_NO_FLUSH);
      in_pos = in_len - gz.avail_in;
      if (ret == Z_STREAM_END) gz_in_member = false;
      else if (ret != Z_OK && ret != Z_BUF_ERROR)
        corrupt(gz.msg ? gz.msg : "inflate error " + std::to_string(ret), n - gz.avail_out);
    }
    return n - gz.avail_out;
  }

  size_t read_zstd(char* dst, size_t n) {
    ZSTD_outBuffer out{dst, n, 0};
    while (out.pos < out.size) {
      ZSTD_inBuffer input{nullptr, 0, 0};
      if (refill()) {
        input = {in.data() + in_pos, in_len - in_pos, 0};
      } else if (zstd_pending == 0) {
        break;  // every frame is complete
      }
      const size_t before = out.pos;
      const size_t ret = ZSTD_decompressStream(zstd, &out, &input);
      in_pos += input.pos;
      if (ZSTD_isError(ret) && ZSTD_getErrorCode(ret) == ZSTD_error_frameParameter_windowTooLarge)
        throw Error(fmt::format("{}: the zstd frame needs a window larger than {} MiB (it was compressed with zstd "
                                "--long=28 or more): roformer keeps its memory bounded and decodes windows up to {} "
                                "MiB; decompress it first (zstd -d --long=31 {}) or compress it again without --long",
                                path, (size_t{1} << kMaxZstdWindowLog) >> 20, (size_t{1} << kMaxZstdWindowLog) >> 20,
                                path));
      if (ZSTD_isError(ret)) corrupt(ZSTD_getErrorName(ret), out.pos);
      zstd_pending = ret;
      // The file has ended inside a frame and the decoder has nothing left to flush.
      if (input.size == 0 && out.pos == before) truncated(out.pos);
    }
    return out.pos;
  }
};

ByteStream::ByteStream(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->compression = compression_of(read_head(path, 4));
  impl_->file = std::fopen(path.c_str(), "rb");
  if (!impl_->file)
    throw Error(fmt::format("cannot open input file {}: {} (check that it exists and is readable)", path,
                            std::strerror(errno)));
  if (impl_->compression == Compression::kGzip) {
    if (inflateInit2(&impl_->gz, 16 + MAX_WBITS) != Z_OK) {  // 16: a gzip header, not zlib's
      impl_->compression = Compression::kNone;  // nothing to end in the destructor
      throw Error("cannot start the gzip decoder for " + path + " (out of memory?)");
    }
  } else if (impl_->compression == Compression::kZstd) {
    impl_->zstd = ZSTD_createDCtx();
    if (!impl_->zstd) throw Error("cannot start the zstd decoder for " + path + " (out of memory?)");
    ZSTD_DCtx_setParameter(impl_->zstd, ZSTD_d_windowLogMax, kMaxZstdWindowLog);
  }
}

ByteStream::~ByteStream() = default;

size_t ByteStream::read(char* out, size_t n) {
  size_t got = 0;
  switch (impl_->compression) {
    case Compression::kGzip: got = impl_->read_gzip(out, n); break;
    case Compression::kZstd: got = impl_->read_zstd(out, n); break;
    default: got = impl_->read_plain(out, n); break;
  }
  impl_->content += static_cast<int64_t>(got);
  return got;
}

Compression ByteStream::compression() const { return impl_->compression; }
int64_t ByteStream::file_bytes() const { return impl_->file_read; }
int64_t ByteStream::content_bytes() const { return impl_->content; }

size_t text_cut(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  const size_t space = text.rfind(' ', max_bytes);  // the piece ends before it; the next starts with it
  if (space != std::string_view::npos && space > 0) return space;
  size_t cut = max_bytes;  // text[cut] starts a character unless it is a continuation byte 10xxxxxx
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut > 0 ? cut : max_bytes;  // no boundary within reach: not UTF-8, and reported as such
}

bool LineReader::next(std::string& line) {
  bool line_ends = false;
  return next_piece(line, std::string::npos, line_ends);
}

bool LineReader::next_piece(std::string& piece, size_t max_bytes, bool& line_ends) {
  size_t scanned = pos_;  // bytes from pos_ known to hold no '\n'
  for (;;) {
    const size_t nl = buffer_.find('\n', scanned);
    const size_t held = (nl == std::string::npos ? buffer_.size() : nl) - pos_;  // of this line, in the buffer
    if (nl != std::string::npos && held <= max_bytes) {
      piece.assign(buffer_, pos_, held);
      pos_ = nl + 1;
      line_ends = true;
      return true;
    }
    if (held > max_bytes) {  // more than a piece, and the line goes on
      const size_t cut = text_cut(std::string_view(buffer_).substr(pos_, held), max_bytes);
      piece.assign(buffer_, pos_, cut);
      pos_ += cut;
      line_ends = false;
      return true;
    }
    if (end_) {
      if (pos_ >= buffer_.size()) return false;
      piece.assign(buffer_, pos_, std::string::npos);  // the last line has no '\n'
      pos_ = buffer_.size();
      line_ends = true;
      return true;
    }
    buffer_.erase(0, pos_);  // keep only the unfinished line, then read more
    scanned = buffer_.size();
    pos_ = 0;
    buffer_.resize(scanned + kBufferBytes);
    const size_t got = stream_.read(buffer_.data() + scanned, kBufferBytes);
    buffer_.resize(scanned + got);
    if (got == 0) end_ = true;
  }
}

}  // namespace roformer::data
