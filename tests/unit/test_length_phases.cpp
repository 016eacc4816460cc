// The length phases (train/length_phases.h): train.phases read by the config table and printed back,
// resolved with the first phase (data.max_seq_len, train.batch_size) and the keys that set each
// shape, the phase of a step, the log boundaries, and their rules, each message naming the key to
// change (issue 55's WEAK 2: a left-out key is not a 0, and a phase must change something).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/config.h"
#include "test_util.h"
#include "train/cadence.h"
#include "train/length_phases.h"
#include "train/run_config.h"

using roformer::config::Config;
using roformer::config::diff;
using roformer::config::to_yaml;
using roformer::config::parse_config;
using roformer::test::error_of;
using roformer::train::parse_run_config;
using namespace roformer::train;

namespace {

const std::vector<std::string> kShortRun = {"schedule.warmup_steps=10", "train.steps=100"};

Config with_phases(const std::string& phases, std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(), kShortRun.begin(), kShortRun.end());
  overrides.push_back("train.phases=" + phases);
  return parse_run_config("", overrides);
}

TEST(LengthPhases, ParseResolveAndRoundTrip) {
  const Config c = parse_run_config(
      "data:\n  max_seq_len: 128\nschedule:\n  warmup_steps: 10\ntrain:\n  steps: 100\n  batch_size: 32\n"
      "  phases:\n    - {from_step: 90, max_seq_len: 512, batch_size: 8}\n");
  const auto phases = resolve_length_phases(c);
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].first_step, 0);
  EXPECT_EQ(phases[0].end_step, 90);
  EXPECT_EQ(phases[0].max_seq_len, 128);
  EXPECT_EQ(phases[0].batch_size, 32);
  EXPECT_EQ(phases[0].seq_key, "data.max_seq_len");
  EXPECT_EQ(phases[0].batch_key, "train.batch_size");
  EXPECT_EQ(phases[1].first_step, 90);
  EXPECT_EQ(phases[1].end_step, 100);
  EXPECT_EQ(phases[1].max_seq_len, 512);
  EXPECT_EQ(phases[1].batch_size, 8);
  EXPECT_EQ(phases[1].seq_key, "train.phases[0].max_seq_len");
  const LengthPhases lp(c);
  EXPECT_EQ(lp.phase_of(0), 0u);
  EXPECT_EQ(lp.phase_of(89), 0u);
  EXPECT_EQ(lp.phase_of(90), 1u);
  EXPECT_EQ(lp.phase_of(99), 1u);
  EXPECT_EQ(lp.boundaries(), (std::vector<int64_t>{90}));  // step 90 (1-based) closes the first phase's records
  EXPECT_TRUE(Cadence::from(c).logs(90));
  EXPECT_EQ(lp.describe(2), "steps 1-90: 64 x 128, steps 91-100: 16 x 512");
  EXPECT_EQ(eval_seq_len(c), 512);  // the length training ends with
  EXPECT_EQ(eval_seq_len(parse_config(to_yaml(c), {"eval.max_seq_len=128"})), 128);
  // Printed and read back; a left-out key keeps the previous phase's value, and its key.
  const Config again = parse_config(to_yaml(c));
  EXPECT_TRUE(diff(c, again).empty());
  const Config kept = with_phases("[{from_step: 50, max_seq_len: 256}]");
  EXPECT_EQ(resolve_length_phases(kept)[1].batch_size, kept.train.batch_size);
  EXPECT_EQ(resolve_length_phases(kept)[1].batch_key, "train.batch_size");
  EXPECT_EQ(resolve_length_phases(kept)[1].max_seq_len, 256);
  EXPECT_EQ(to_yaml(kept).find("batch_size: 0"), std::string::npos) << "a left-out key is printed as left out";
  EXPECT_EQ(resolve_length_phases(parse_config("")).size(), 1u);
  EXPECT_EQ(resolve_length_phases(parse_config("")).front().end_step, Config().train.steps);
  EXPECT_FALSE(LengthPhases(parse_config("")).phased());
  EXPECT_EQ(parse_config("", {"train.phases=[{from_step: 50, max_seq_len: 256}]", "train.phases=[]"}).train.phases.size(),
            0u);
}

// A run cut short (train.steps lowered for a smoke test of a phased config) trains the phases it
// reaches, says which it leaves out, and still checks them (issue 55: short runs train).
TEST(LengthPhases, ARunCutShortTrainsThePhasesItReaches) {
  const Config c = with_phases("[{from_step: 50, max_seq_len: 256}, {from_step: 100, batch_size: 4}, "
                               "{from_step: 200, max_seq_len: 512}]");
  const auto phases = resolve_length_phases(c);
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[1].first_step, 50);
  EXPECT_EQ(phases[1].end_step, 100);
  EXPECT_EQ(LengthPhases(c).boundaries(), (std::vector<int64_t>{50}));
  EXPECT_EQ(eval_seq_len(c), 256) << "evaluation runs at the length this run ends with";
  EXPECT_EQ(phases_cut_short(c), "train.steps 100 ends before train.phases[1] begins (from_step 100): the run trains 2 "
                                 "of the config's 4 length phases, leaving out train.phases[1] to [2] (more "
                                 "train.steps trains them)");
  const Config none = with_phases("[{from_step: 100, max_seq_len: 256}]");
  ASSERT_EQ(resolve_length_phases(none).size(), 1u);
  EXPECT_EQ(resolve_length_phases(none)[0].end_step, 100);
  EXPECT_FALSE(LengthPhases(none).phased());
  EXPECT_EQ(eval_seq_len(none), none.data.max_seq_len);
  EXPECT_NE(phases_cut_short(none).find("leaving out train.phases[0] (more train.steps trains it)"), std::string::npos)
      << phases_cut_short(none);
  EXPECT_EQ(phases_cut_short(with_phases("[{from_step: 99, max_seq_len: 256}]")), "");
  // The phases left out are checked as the others: the config holds for the full run.
  const auto msg =
      error_of([] { with_phases("[{from_step: 50, max_seq_len: 256}, {from_step: 120, max_seq_len: 4096}]"); });
  EXPECT_NE(msg.find("train.phases[1].max_seq_len (4096) exceeds model.max_position_embeddings"), std::string::npos)
      << msg;
  EXPECT_NE(error_of([] { with_phases("[{from_step: 150, max_seq_len: 256}, {from_step: 120, batch_size: 4}]"); })
                .find("train.phases[1].from_step (120) must be greater than the previous phase's (150)"),
            std::string::npos);
}

TEST(LengthPhases, AreCheckedEntryByEntry) {
  auto refused = [](const std::string& phases, const std::string& expected) {
    const auto msg = error_of([&] { with_phases(phases); });
    EXPECT_NE(msg.find(expected), std::string::npos) << phases << ": " << msg;
  };
  refused("[{from_step: 50, max_len: 256}]", "train.phases[0] has no key 'max_len'; did you mean 'max_seq_len'?");
  refused("[{max_seq_len: 256}]", "train.phases[0] has no from_step");
  refused("[{from_step:50,max_seq_len:256}]", "'from_step:50' needs a space after its colon ('from_step: 50')");
  refused("[{from_step: 0, max_seq_len: 256}]", "train.phases[0].from_step (0) must be > 0");
  refused("[{from_step: 60, max_seq_len: 256}, {from_step: 40, batch_size: 4}]",
          "train.phases[1].from_step (40) must be greater than the previous phase's (60)");
  refused("[{from_step: 50}]", "train.phases[0] changes neither max_seq_len nor batch_size");
  refused("[{from_step: 50, max_seq_len: 4}]", "train.phases[0].max_seq_len (4) must be at least 8");
  refused("[{from_step: 50, max_seq_len: 4096}]",
          "train.phases[0].max_seq_len (4096) exceeds model.max_position_embeddings (1536)");
  refused("[{from_step: 50, max_seq_len: 'long'}]", "train.phases[0].max_seq_len: expected an integer, got 'long'");
  refused("{from_step: 50}", "config key train.phases: expected a list of phases");
  refused("[512]", "config key train.phases[0]: expected a mapping");
  // A phase that keeps its length from the one before is named by the key that set it.
  const auto msg = error_of([] {
    with_phases("[{from_step: 50, batch_size: 1}]",
                {"masking.mask_prob=0.005", "masking.exact_count=false", "data.max_seq_len=64", "train.batch_size=64"});
  });
  EXPECT_NE(msg.find("raise masking.mask_prob (or train.phases[0].batch_size)"), std::string::npos) << msg;
  EXPECT_NE(error_of([] { parse_run_config("", {"eval.max_seq_len=4"}); }).find("eval.max_seq_len (4) must be at least 8"),
            std::string::npos);
}

// Issue 55, WEAK 2: an explicit 0 is a value out of range, not "left out" (it said "changes neither");
// a phase that changes nothing (it would only start the data order anew) is refused like one
// without keys (it was accepted).
TEST(LengthPhases, ExplicitZeroAndAPhaseThatChangesNothingAreRefused) {
  auto refused = [](const std::string& phases, const std::string& expected) {
    const auto msg = error_of([&] { with_phases(phases, {"data.max_seq_len=128", "train.batch_size=32"}); });
    EXPECT_NE(msg.find(expected), std::string::npos) << phases << ": " << msg;
    EXPECT_EQ(msg.find("changes neither"), std::string::npos) << phases << ": " << msg;
  };
  refused("[{from_step: 50, batch_size: 0}]",
          "train.phases[0].batch_size (0) must be at least 1 (or left out: the previous phase's)");
  refused("[{from_step: 50, max_seq_len: 0, batch_size: 8}]",
          "train.phases[0].max_seq_len (0) must be at least 8 (or left out: the previous phase's)");
  refused("[{from_step: 50, max_seq_len: 128}]",
          "train.phases[0] trains as the phase before it does (max_seq_len 128, batch_size 32): it would change "
          "nothing but start the data order anew");
  refused("[{from_step: 40, max_seq_len: 256}, {from_step: 60, batch_size: 32}]",
          "train.phases[1] trains as the phase before it does (max_seq_len 256, batch_size 32)");
  EXPECT_NO_THROW(with_phases("[{from_step: 40, max_seq_len: 256}, {from_step: 60, max_seq_len: 128}]",
                              {"data.max_seq_len=128"}));  // back to an earlier shape is a change
}

// The first phase's keys no step reads once later entries set their own: a resume may change them
// and still continue exactly (checkpoint::check_resume_changes is given them).
TEST(LengthPhases, KeysNoLaterStepUses) {
  const Config c = with_phases("[{from_step: 40, batch_size: 8}, {from_step: 60, max_seq_len: 256}]");
  EXPECT_EQ(keys_unused_from(c, 0), (std::vector<std::string>{}));
  EXPECT_EQ(keys_unused_from(c, 39), (std::vector<std::string>{}));
  EXPECT_EQ(keys_unused_from(c, 40), (std::vector<std::string>{"train.batch_size"}));
  EXPECT_EQ(keys_unused_from(c, 60), (std::vector<std::string>{"data.max_seq_len", "train.batch_size"}));
  EXPECT_TRUE(keys_unused_from(parse_config(""), 5).empty());
}

}  // namespace
