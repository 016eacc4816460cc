// `roformer bench data`: prepare throughput per thread count and loader throughput, printed as a
// table (a program that prints figures, never a test with a time limit).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace roformer::bench {

struct DataBenchOptions {
  std::string input;                      // any input prepare reads (file, folder, pattern)
  std::string tokenizer;                  // .model, tokenizer.json or a folder; empty: train a vocab-8000 one
  int64_t seq_len = 512;
  int64_t batch_size = 32;
  std::vector<int64_t> threads_list = {1, 2};  // prepare threads, and loader workers for the 2nd run
  double seconds = 5;                     // per loader measurement
};

// Runs the benchmark, prints the results to stdout and returns them as Markdown table rows.
std::string run_data_benchmark(const DataBenchOptions& options);

}  // namespace roformer::bench
