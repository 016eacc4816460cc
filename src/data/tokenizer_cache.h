// The tokenizer cache: a tokenizer a run trains (RUN_DIR/tokenizer, from the config's tokenizer.*
// settings) is kept under a key of those settings and of its input files as they are (absolute
// paths, sizes, modification times), so that the next run directory trained from the same files and
// settings copies it (a second) instead of training it again (9-17 s on Brown, minutes on more text).
//
// Where: ROFORMER_TOKENIZER_CACHE, else $XDG_CACHE_HOME/roformer/tokenizers, else
// ~/.cache/roformer/tokenizers; ROFORMER_TOKENIZER_CACHE=off turns it off. Each entry is a folder
// <key>/ holding tokenizer.model, tokenizer.vocab and training.json, published whole by a rename, so
// a reader sees an entry complete or not at all. The cache is a convenience: an entry that cannot be
// written or read is said in the log and the run trains its own.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "data/sentencepiece_tokenizer.h"

namespace roformer::data {

// The cache folder the environment names; none when it is turned off (or no home is known).
std::optional<std::filesystem::path> tokenizer_cache_dir();

// The key of a training: its settings (training_settings) and its expanded input files' absolute
// paths, sizes and modification times, hashed to 16 hex digits. Throws roformer::Error as
// expand_inputs does for an input that does not exist.
std::string tokenizer_cache_key(const TokenizerTrainOptions& options);

// Copies the cached tokenizer of `key` into out_dir (each file written whole, training.json last) and
// returns its tokenizer.model path; none when the cache has no complete, loadable entry for it (a
// damaged entry is removed, with a warning).
std::optional<std::string> restore_cached_tokenizer(const std::filesystem::path& cache, const std::string& key,
                                                    const std::string& out_dir);

// Keeps the tokenizer trained into out_dir under `key` (an entry already there stays). A failure is
// a warning, never an error: the run has its tokenizer either way.
void store_cached_tokenizer(const std::filesystem::path& cache, const std::string& key, const std::string& out_dir);

}  // namespace roformer::data
