// `roformer bench data` (see data_bench.h): encode the input with 1..N threads, then serve masked
// batches with num_workers=0 (one core, synchronous) and with background workers.
#include "bench/data_bench.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/file.h"
#include "core/temp_dir_guard.h"
#include "data/corpus.h"
#include "data/loader.h"
#include "data/sentencepiece_tokenizer.h"

namespace roformer::bench {

using namespace roformer::data;  // the data bench measures data/

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// One loader row: batches served for options.seconds after a warm-up, with `workers` background
// workers and a masking or packing variant ("", "whole_word" or "document").
std::string measure_loader(const std::shared_ptr<const PreparedCorpus>& corpus, const DataBenchOptions& options,
                           int64_t workers, const std::string& variant) {
  LoaderOptions o;
  o.batch_size = options.batch_size;
  o.max_seq_len = options.seq_len;
  o.num_workers = workers;
  o.prefetch = 2 * std::max<int64_t>(1, workers);
  o.masking.whole_word = variant == "whole_word";
  if (variant == "document") o.packing = "document";
  MlmLoader loader(corpus, o);
  for (int i = 0; i < 3; ++i) loader.next();  // warm-up (allocator, page cache)
  int64_t tokens = 0, predicted = 0, batches = 0;
  const auto t0 = Clock::now();
  double secs = 0;
  do {
    const Batch b = loader.next();
    tokens += b.num_tokens;
    predicted += b.pred_positions.size(0);
    ++batches;
    secs = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (secs < options.seconds);
  return fmt::format("| loader | {}{}, B={} T={} | {:.1f}M tokens/s ({:.2f}M predicted tokens/s, {:.0f} batches/s) |\n",
                     workers == 0 ? "num_workers=0 (synchronous, one core)" : fmt::format("num_workers={}", workers),
                     variant == "whole_word" ? ", whole-word masking" : variant == "document" ? ", packing=document" : "",
                     options.batch_size, options.seq_len, tokens / 1e6 / secs, predicted / 1e6 / secs, batches / secs);
}

}  // namespace

std::string run_data_benchmark(const DataBenchOptions& options) {
  if (!fs::exists(options.input)) throw Error("benchmark input not found: " + options.input + " (pass --input FILE)");
  const core::ScratchDir scratch("roformer-bench-", "the benchmark's tokenizer and prepared copies");
  const fs::path& work = scratch.path();  // removed on every exit path, a stop signal included

  // Each measurement takes seconds (the loader's --seconds each): a line before each says where it is.
  const int64_t measurements = (options.tokenizer.empty() ? 1 : 0) + static_cast<int64_t>(options.threads_list.size()) + 4;
  int64_t measurement = 0;
  auto next = [&](const std::string& what) { spdlog::info("bench data: {} of {}: {}", ++measurement, measurements, what); };
  std::string tokenizer = options.tokenizer;
  if (tokenizer.empty()) {
    next("training a tokenizer on " + options.input + " (--tokenizer FILE skips this)");
    TokenizerTrainOptions t;
    t.inputs = {options.input};
    t.out_dir = (work / "tok").string();
    t.vocab_size = 8000;
    const auto t0 = Clock::now();
    tokenizer = train_tokenizer(t);
    spdlog::info("bench: tokenizer trained in {:.1f}s", std::chrono::duration<double>(Clock::now() - t0).count());
  }

  std::ostringstream table;
  table << "| measurement | setting | throughput |\n|---|---|---|\n";
  std::string prepared;
  for (const int64_t threads : options.threads_list) {
    PrepareOptions p;
    p.tokenizer_model = tokenizer;
    p.inputs = {options.input};
    p.out_dir = (work / ("prepared-" + std::to_string(threads))).string();
    p.num_threads = threads;
    p.progress = false;
    next(fmt::format("prepare with {} thread(s)", threads));
    const PrepareStats s = prepare_corpus(p);
    table << "| prepare | " << threads << " thread(s) | "
          << fmt::format("{:.2f} MB/s of text, {:.2f}M tokens/s", s.text_bytes / 1e6 / s.seconds, s.tokens / 1e6 / s.seconds)
          << " |\n";
    prepared = p.out_dir;
  }
  const auto corpus = PreparedCorpus::open(prepared);
  int64_t max_workers = 1;
  for (const int64_t t : options.threads_list) max_workers = std::max(max_workers, t);
  // The default masking with and without workers, then whole-word masking and document packing synchronously.
  for (const auto& [workers, variant] : std::vector<std::pair<int64_t, std::string>>{
           {0, ""}, {max_workers, ""}, {0, "whole_word"}, {0, "document"}}) {
    next(fmt::format("loader with {} worker(s){} for {}s", workers, variant.empty() ? "" : ", " + variant,
                     options.seconds));
    table << measure_loader(corpus, options, workers, variant);
  }
  std::cout << table.str() << std::flush;
  return table.str();
}

}  // namespace roformer::bench
