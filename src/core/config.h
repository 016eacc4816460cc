// The run configuration: one typed struct per section, defaults in code, one comment per field.
//
// The YAML loader, `--set section.key=value` overrides, the table's checks (types, ranges, choices),
// the resume behaviour of each key and the printed reference (`roformer config defaults`,
// docs/config.md) all come from the single field table in config.cpp, so a field added there is
// loadable, overridable, checked and documented at once. The rules across keys belong to the
// components that read them, each in its own file (train/run_config.h lists them): a new key is a
// field here, its row in the table, and its rules beside the code that uses it.
// This header is deliberately free of yaml-cpp and LibTorch includes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace roformer::config {

// The enumerated settings. The config table (config.cpp) maps each to the name a config writes
// ("rotary", "bf16"); to_string gives that name back. Code below the config compares enums.
enum class Position { kRotary, kAbsolute, kNone, kDisentangled };  // where position information enters the model
// Which relative-position terms disentangled attention adds to the content-to-content scores
// (DeBERTa's pos_att_type): content-to-position, position-to-content, or both.
enum class RelativeTerms { kBoth, kC2P, kP2C };
enum class Norm { kPost, kPre };                     // LayerNorm after or before each residual block
enum class Attention { kSoftmax, kLinear };
enum class Activation { kGelu, kGeluTanh, kRelu };  // gelu (erf), gelu (tanh approximation), relu
enum class FeedForward { kMlp, kGlu };              // W_2 act(W_1 x), or W_o (act(x W_in) * x W_gate) (GeGLU with gelu)
enum class Precision { kFp32, kBf16, kFp16 };        // fp32, or autocast to bf16 / fp16
enum class ParamDtype { kAuto, kFp32, kBf16 };       // the parameters the step computes with (auto: see resolve_param_dtype)
enum class Fp8 { kOff, kDynamic };                   // the encoder layers' GEMMs in FP8: off, or per-tensor dynamic scaling

std::string to_string(Position value);
std::string to_string(RelativeTerms value);
std::string to_string(Norm value);
std::string to_string(Attention value);
std::string to_string(Activation value);
std::string to_string(FeedForward value);
std::string to_string(Precision value);
std::string to_string(ParamDtype value);
std::string to_string(Fp8 value);

// The model's architecture; model::RoFormerOptions takes it as it is (docs/config.md).
struct ModelConfig {
  int64_t vocab_size = 0;                 // 0: taken from the tokenizer
  int64_t hidden_size = 768;              // H
  int64_t num_layers = 12;                // encoder layers
  int64_t num_heads = 12;                 // N; head dim D = H / N must be even (rotary pairs)
  int64_t intermediate_size = 3072;       // feed-forward inner size
  int64_t embedding_size = 0;             // E; 0: equal to hidden_size; E < H adds an E->H projection
  int64_t max_position_embeddings = 1536; // rows of the rotary sin/cos table or the absolute position table
  Position position = Position::kRotary;  // rotary | absolute | none | disentangled
  // position disentangled (DeBERTa-v2/v3 relative attention; docs/model.md); the defaults are DeBERTa-v3's.
  int64_t position_buckets = 256;         // relative distances log-bucketed beyond position_buckets/2; 0: exact ones
  int64_t max_relative_positions = 0;     // distances from here on share the outermost bucket; 0: max_position_embeddings
  RelativeTerms pos_att_type = RelativeTerms::kBoth;  // c2p+p2c | c2p | p2c
  bool share_att_key = true;              // the relative embeddings are projected by the query/key weights
  bool position_biased_input = false;     // also add a learned absolute table to the input embeddings (DeBERTa-v1)
  bool enhanced_mask_decoder = false;     // EMD: the last layer re-run twice with absolute positions, for the MLM head
  int64_t type_vocab_size = 2;            // token-type embeddings; 0 disables them
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double layer_norm_eps = 1e-12;
  double initializer_range = 0.02;
  double rotary_base = 10000.0;           // theta_i = base^(-2i/D)
  bool rotary_value = false;              // also rotate V
  Norm norm = Norm::kPost;                // post | pre
  Attention attention = Attention::kSoftmax;  // softmax | linear
  Activation hidden_act = Activation::kGelu;  // gelu | gelu_tanh | relu
  bool bias = true;                       // additive biases in the linear layers and LayerNorms (false: ModernBERT's none; the MLM decoder keeps its own)
  FeedForward feed_forward = FeedForward::kMlp;  // mlp | glu (ModernBERT's GeGLU: W_in to 2 x intermediate_size)
  bool first_attention_norm = true;       // pre-LN: layer 0 normalizes its attention input (false: the embedding LayerNorm serves, ModernBERT)
  int64_t local_attention = 0;            // window of local layers: tokens attend within +-local_attention/2; 0: every layer global
  int64_t global_attention_every = 3;     // with local_attention: layers 0, n, 2n, ... attend globally, the others locally
  double local_rotary_base = 0.0;         // rotary base of the local layers; 0: rotary_base
  bool gradient_checkpointing = false;
  // The Hugging Face family the model exports as (config.json's model_type): auto, the one of its
  // architecture (hf/family.h); roberta for a BERT-like model started from RoBERTa.
  std::string family = "auto";
};

struct TokenizerConfig {
  std::string model = "";                 // existing SentencePiece .model; empty: train one
  std::vector<std::string> input;         // text used to train it (defaults to data.train_files)
  int64_t vocab_size = 8000;
  std::string model_type = "unigram";     // unigram | bpe
  double character_coverage = 0.9995;
  int64_t input_sentence_size = 2000000;  // lines sampled from large inputs
  int64_t seed = 42;
};

struct DataConfig {
  std::vector<std::string> train_files;   // text / JSONL / Parquet files, folders, globs; or prepared dirs
  std::vector<std::string> valid_files;
  std::string prepared_dir = "";          // where prepared shards go; empty: RUN_DIR/data
  int64_t max_seq_len = 512;              // T, including [CLS] and [SEP]
  std::string packing = "full";           // full (pack documents, no padding) | document (pad)
  int64_t num_workers = 2;                // background batch builders
  int64_t prefetch = 4;                   // batches queued ahead
  std::string text_field = "text";        // JSONL field / Parquet column holding the text
};

struct MaskingConfig {
  double mask_prob = 0.15;                // fraction of positions predicted
  double mask_token_rate = 0.8;           // of those, replaced by [MASK]
  double random_token_rate = 0.1;         // of those, replaced by a random non-special token
  bool whole_word = false;
  bool exact_count = true;                // round(p * n) per sequence (static predicted count)
};

struct OptimizerConfig {
  double lr = 5e-4;
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-6;
  double weight_decay = 0.01;
  bool decay_embeddings = false;
  double grad_clip = 1.0;                 // max global grad norm; 0 disables clipping
  bool fused = true;                      // fused AdamW kernel (CUDA and CPU)
};

struct ScheduleConfig {
  std::string type = "linear";            // linear | cosine | wsd | constant
  int64_t warmup_steps = 1000;
  double min_lr = 0.0;
  double decay_fraction = 0.2;            // wsd: the last fraction of train.steps that decays to min_lr
};

// A later phase of train.phases (docs/training.md, "Length phases"): from optimizer step from_step
// on (0-based; the step logged as from_step + 1), sequences of max_seq_len tokens, batch_size of them
// per micro-batch; one left out keeps the previous phase's. The steps before the first entry are the
// run's first phase: data.max_seq_len and train.batch_size. The phases' rules and everything they
// decide are train/length_phases.h's.
struct PhaseConfig {
  int64_t from_step = 0;
  std::optional<int64_t> max_seq_len;
  std::optional<int64_t> batch_size;
};

struct TrainConfig {
  int64_t steps = 100000;
  int64_t batch_size = 32;                // sequences per micro-batch
  int64_t grad_accum = 1;
  Precision precision = Precision::kBf16;  // fp32 | bf16 | fp16
  ParamDtype param_dtype = ParamDtype::kAuto;  // auto | fp32 | bf16 (bf16 weights, fp32 master weights; precision bf16)
  std::string device = "auto";            // auto | cpu | cuda | cuda:N
  bool cuda_graph = true;                 // CUDA: capture the step's micro-batches and update as CUDA graphs
  Fp8 fp8 = Fp8::kOff;                    // off | dynamic: the encoder layers' linear layers as FP8 GEMMs (issue 51)
  int64_t seed = 1234;
  std::string run_dir = "runs/default";
  int64_t num_threads = 0;                // CPU intra-op threads; 0: LibTorch default
  std::vector<PhaseConfig> phases;        // later sequence-length phases; empty: one phase
};

struct CheckpointConfig {
  int64_t every = 1000;                   // steps; 0: only at the end
  int64_t keep_last = 3;
};

struct LoggingConfig {
  int64_t every = 10;
  std::string progress = "auto";          // auto | bar | plain
  std::string level = "info";             // trace | debug | info | warn | error
  bool tensorboard = true;                // TensorBoard event files in RUN_DIR (rank 0)
};

struct EvalConfig {
  int64_t every = 1000;                   // steps; 0 disables periodic evaluation
  int64_t max_sequences = 2048;
  int64_t batch_size = 32;
  int64_t seed = 0;
  double mask_prob = 0.15;                // the evaluation's masking (80/10/10, by piece), whatever masking.* trains with
  int64_t max_seq_len = 0;                // T of the validation sequences; 0: the length training ends with
};

// Data parallelism (docs/distributed.md). Used only when a launcher (torchrun, SLURM srun) starts
// several processes; a single process ignores it.
struct DistributedConfig {
  std::string backend = "auto";           // auto (nccl on CUDA, gloo on CPU) | gloo | nccl
  int64_t timeout_s = 600;                // rendezvous and every collective
  double bucket_mb = 25.0;                // gradient all-reduce bucket size
};

struct Config {
  ModelConfig model;
  TokenizerConfig tokenizer;
  DataConfig data;
  MaskingConfig masking;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  TrainConfig train;
  CheckpointConfig checkpoint;
  LoggingConfig logging;
  EvalConfig eval;
  DistributedConfig distributed;
};

// Loads a YAML file (missing sections and keys keep their defaults), applies `section.key=value`
// overrides in order, then checks the table (check_table: types, ranges, choices). The rules across
// keys are the components' (a run's config checks them all: train/run_config.h). Throws
// roformer::Error naming the offending key.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from YAML text (tests, checkpoints).
Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                    const std::string& origin = "<string>");
// Applies one `section.key=value` override; the value is parsed as YAML (so `[a, b]` is a list).
void apply_override(Config& config, const std::string& assignment);
// Every field of `section` ("": all) within its range and choices: a config built in code is held to
// what the YAML loader enforces.
void check_table(const Config& config, const std::string& section = "");
// A config that breaks a rule: throws roformer::Error "invalid config: MSG". Each component's rules
// (train/run_config.h lists them) name the key to change.
[[noreturn]] void invalid(const std::string& msg);

// The resolved config as YAML (round-trips through parse_config).
std::string to_yaml(const Config& config);
// Every key with its default and comment: YAML with comments, or a Markdown table.
std::string defaults_reference(bool markdown);
// Every "section.key" path, in table order.
std::vector<std::string> all_keys();

// Every key with its typed value, in table order (for tools that take typed settings: TensorBoard's
// HParams).
using ConfigValue = std::variant<int64_t, double, bool, std::string, std::vector<std::string>>;  // train.phases: its YAML text
std::vector<std::pair<std::string, ConfigValue>> values(const Config& config);

// What a resumed run may change, a column of the config table (checkpoint/resume_policy.h sorts a
// resume's changes by it).
enum class Resume {
  kExact,   // changes neither the model nor the data order: the run still continues exactly
  kRescue,  // allowed, to rescue a diverged run: it is then no longer an exact continuation
  kRefuse,  // changes the model or the data
};
// The column of "section.key" (an unknown key: kRefuse).
Resume resume_of(const std::string& key);

// One key whose value differs between two configs, as YAML text (the field table's rendering).
struct ConfigChange {
  std::string key;  // "section.key"
  std::string before, after;
};
// The keys whose values differ, in table order (compared field by field, not as text).
std::vector<ConfigChange> diff(const Config& before, const Config& after);

// train.param_dtype auto -> bf16 where it was measured faster at the same losses (CUDA with
// train.precision bf16: docs/benchmarks.md), fp32 elsewhere (the CPU, fp32, fp16). The trainer
// resolves it once the device is known, so config.yaml and checkpoints record what ran.
inline void resolve_param_dtype(Config& c, bool cuda) {
  if (c.train.param_dtype != ParamDtype::kAuto) return;
  c.train.param_dtype = cuda && c.train.precision == Precision::kBf16 ? ParamDtype::kBf16 : ParamDtype::kFp32;
}

// The autocast a training step enters: train.precision, except that bf16 parameters compute in
// bf16 without autocast (kFp32 turns it off).
inline Precision autocast_precision(const Config& c) {
  return c.train.param_dtype == ParamDtype::kBf16 ? Precision::kFp32 : c.train.precision;
}

// The head dimension and effective embedding size implied by the model section.
inline int64_t head_dim(const ModelConfig& m) { return m.hidden_size / m.num_heads; }
inline int64_t effective_embedding_size(const ModelConfig& m) {
  return m.embedding_size > 0 ? m.embedding_size : m.hidden_size;
}
}  // namespace roformer::config
