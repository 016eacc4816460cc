// The input files a user lists: each entry is a file, a folder or a glob pattern, expanded here into
// the files read, in a stable order (docs/data.md, "Many files"):
//   a file     itself, whatever its name
//   a folder   every corpus file under it, recursively: names ending .txt, .text, .jsonl, .json or
//              .parquet, each optionally followed by .gz, .gzip, .zst or .zstd; names starting with
//              '.' (files and folders) are skipped, and so is anything else (README.md, LICENSE, ...)
//   a pattern  an entry holding * ? or [ (and naming no existing file): the paths it matches
//              (glob(3): * and ? never match '/', no **); a matched folder is read like a folder
// The files of one folder or pattern are sorted by path, byte by byte (shard-00009 before
// shard-00010 when numbers are zero-padded, as published corpora are); the entries keep their
// listed order. A file reached twice (listed twice, or by name and through its folder) is an error.
// Inside a folder, roformer's own outputs (a run directory, a prepared corpus, a tokenizer, an
// export, a checkpoint) are skipped: a run directory inside its input folder is never read.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace roformer::data {

// The files of `inputs`, expanded as above. Throws roformer::Error, before anything is written,
// when an entry names nothing: a missing file, a pattern matching nothing, a folder without corpus
// files, a prepared corpus or another output of roformer (not an input), a file reached twice.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs);

// The expanded files as they are now, for telling whether they changed: a JSON array of
// {"path": absolute (UTF-8, or escaped), "size", "mtime"} in their order (the prepared-data cache's
// signature and the tokenizer cache's key).
nlohmann::json files_signature(const std::vector<std::string>& files);

// True when a file name is one a folder's expansion takes (see above).
bool is_corpus_file_name(const std::string& name);

}  // namespace roformer::data
