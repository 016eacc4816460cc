// LrSchedule: exact values at given steps for warmup, linear, cosine and constant; the schedule's
// rules of a run's config (validate_schedule), which it owns and core's table does not check.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"
#include "train/run_config.h"
#include "train/schedule.h"

using roformer::config::ScheduleConfig;
using roformer::train::LrSchedule;

namespace {
ScheduleConfig make(const std::string& type, int64_t warmup, double min_lr) {
  ScheduleConfig s;
  s.type = type;
  s.warmup_steps = warmup;
  s.min_lr = min_lr;
  return s;
}
}  // namespace

TEST(LrSchedule, LinearWarmupThenLinearDecayToMin) {
  LrSchedule s(make("linear", 10, 1e-5), 1e-3, 110);
  EXPECT_DOUBLE_EQ(s.lr(0), 1e-4);        // (0 + 1) / 10 of the peak: the first update is not wasted
  EXPECT_DOUBLE_EQ(s.lr(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.lr(9), 1e-3);        // warmup ends at the peak
  EXPECT_DOUBLE_EQ(s.lr(10), 1e-3);       // decay starts at the peak
  EXPECT_NEAR(s.lr(60), 1e-5 + (1e-3 - 1e-5) * (1.0 - 50.0 / 99.0), 1e-15);
  EXPECT_DOUBLE_EQ(s.lr(109), 1e-5);      // the last step reaches min_lr
  EXPECT_DOUBLE_EQ(s.lr(500), 1e-5);      // past the end it stays there
}

TEST(LrSchedule, CosineDecay) {
  LrSchedule s(make("cosine", 0, 0.0), 2.0, 101);
  EXPECT_DOUBLE_EQ(s.lr(0), 2.0);
  EXPECT_NEAR(s.lr(50), 1.0, 1e-12);      // halfway: (1 + cos(pi/2)) / 2
  EXPECT_NEAR(s.lr(25), 1.0 + std::cos(M_PI * 0.25), 1e-12);
  EXPECT_NEAR(s.lr(100), 0.0, 1e-12);
}

TEST(LrSchedule, WarmupStableDecay) {
  ScheduleConfig c = make("wsd", 10, 1e-5);
  c.decay_fraction = 0.2;
  LrSchedule s(c, 1e-3, 110);               // decay from step 110 - 22 = 88 to the last step, 109
  EXPECT_DOUBLE_EQ(s.lr(4), 5e-4);          // warmup as for every schedule
  EXPECT_DOUBLE_EQ(s.lr(10), 1e-3);         // stable at the peak ...
  EXPECT_DOUBLE_EQ(s.lr(87), 1e-3);
  EXPECT_DOUBLE_EQ(s.lr(88), 1e-3);         // ... until the decay starts there
  EXPECT_NEAR(s.lr(99), 1e-5 + (1e-3 - 1e-5) * (1.0 - 11.0 / 21.0), 1e-15);
  EXPECT_DOUBLE_EQ(s.lr(109), 1e-5);        // min_lr at the last step
  c.decay_fraction = 1.0;                   // the whole run decays: the linear schedule
  LrSchedule all(c, 1e-3, 110), linear(make("linear", 10, 1e-5), 1e-3, 110);
  for (int64_t step : {0, 9, 10, 50, 100, 109}) EXPECT_DOUBLE_EQ(all.lr(step), linear.lr(step)) << step;
}

TEST(LrSchedule, ConstantAfterWarmup) {
  LrSchedule s(make("constant", 4, 0.0), 0.5, 1000);
  EXPECT_DOUBLE_EQ(s.lr(1), 0.25);
  EXPECT_DOUBLE_EQ(s.lr(3), 0.5);
  EXPECT_DOUBLE_EQ(s.lr(999), 0.5);
}

TEST(LrSchedule, WarmupCoveringEveryStep) {
  LrSchedule s(make("linear", 5, 0.0), 1.0, 5);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.2);
  EXPECT_DOUBLE_EQ(s.lr(4), 1.0);
}

// A run whose last step still runs at the peak is said, with the keys to change; a run that decays,
// a constant schedule and min_lr at the peak are not.
TEST(LrSchedule, SaysWhenTheRateNeverDecays) {
  EXPECT_EQ(LrSchedule(make("linear", 10, 0.0), 3e-3, 10).never_decays(),
            "the learning rate never decays: train.steps 10 ends with schedule.warmup_steps 10, so the last step "
            "still runs at the peak 0.003; lower schedule.warmup_steps (or raise train.steps) for the linear decay "
            "to schedule.min_lr");
  EXPECT_NE(LrSchedule(make("cosine", 7, 0.0), 3e-3, 8).never_decays().find("ends one step after"), std::string::npos);
  EXPECT_EQ(LrSchedule(make("linear", 7, 0.0), 3e-3, 9).never_decays(), "");  // the last step reaches min_lr
  EXPECT_EQ(LrSchedule(make("constant", 10, 0.0), 3e-3, 10).never_decays(), "");
  EXPECT_EQ(LrSchedule(make("linear", 10, 3e-3), 3e-3, 10).never_decays(), "");
  ScheduleConfig wsd = make("wsd", 10, 0.0);
  wsd.decay_fraction = 0.05;  // 1 of 20 steps: no step below the peak
  EXPECT_NE(LrSchedule(wsd, 1.0, 20).never_decays().find("the wsd decay gets 1 of the 20 train.steps"),
            std::string::npos);
  EXPECT_EQ(LrSchedule(wsd, 1.0, 100).never_decays(), "");
}

// The schedule's rules live with the schedule (issue 52): the config table alone (config::parse_config:
// types, ranges, choices) takes these settings; the run's config (train/run_config.h) refuses each,
// naming the key to change.
TEST(LrSchedule, ItsRulesAreTheSchedulesAndNameTheKeyToChange) {
  using roformer::test::error_of;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"schedule.decay_fraction=0.5"}, "schedule.decay_fraction = 0.5 applies to schedule.type: wsd only (got linear)"},
      {{"optimizer.lr=1e-4", "schedule.min_lr=1e-3"}, "schedule.min_lr (0.001) must be <= optimizer.lr (0.0001)"}};
  for (const auto& [overrides, message] : cases) {
    EXPECT_NO_THROW(roformer::config::parse_config("", overrides)) << message;
    const std::string msg = error_of([&] { roformer::train::parse_run_config("", overrides); });
    EXPECT_NE(msg.find("invalid config: " + message), std::string::npos) << msg;
  }
}

// A run shorter than its schedule trains (issue 55: `--set train.steps=2` of a config warming up for 30
// was refused twice): the schedule is shortened to fit, said once, and the never-decays warning stays
// quiet; a schedule that fits is not touched.
TEST(LrSchedule, ARunShorterThanItsScheduleShortensIt) {
  for (const auto& overrides : std::vector<std::vector<std::string>>{
           {"train.steps=2", "schedule.warmup_steps=30", "schedule.type=wsd"},
           {"train.steps=10", "schedule.warmup_steps=20"},
           {"schedule.type=wsd", "schedule.warmup_steps=0", "train.steps=12", "schedule.decay_fraction=0.01"}})
    EXPECT_NO_THROW(roformer::train::parse_run_config("", overrides)) << overrides[0];

  ScheduleConfig smoke = make("wsd", 30, 0.0);  // decay_fraction 0.2 of 2 steps rounds to none
  const LrSchedule two(smoke, 1.0, 2);
  EXPECT_DOUBLE_EQ(two.lr(0), 1.0);  // warmup clipped to one step
  EXPECT_EQ(two.decay_start(), 1);
  EXPECT_EQ(two.shortened(),
            "train.steps 2 is shorter than the schedule, which was shortened to fit the run: schedule.warmup_steps 30 "
            "clipped to 1; the wsd decay (schedule.decay_fraction of 2 steps rounds to no step) given one step (the "
            "learning rate of each step follows the shortened schedule; more train.steps, or a lower "
            "schedule.warmup_steps, run it as configured)");
  EXPECT_EQ(two.never_decays(), "") << "one warning, not two";

  const LrSchedule ten(make("linear", 20, 0.0), 1.0, 10);  // half warms up, half decays to min_lr
  EXPECT_DOUBLE_EQ(ten.lr(0), 0.2);
  EXPECT_DOUBLE_EQ(ten.lr(4), 1.0);
  EXPECT_DOUBLE_EQ(ten.lr(9), 0.0);
  EXPECT_NE(ten.shortened().find("schedule.warmup_steps 20 clipped to 5"), std::string::npos);

  EXPECT_EQ(LrSchedule(make("linear", 5, 0.0), 1.0, 5).shortened(), "");  // warmup ending on the last step fits
  ScheduleConfig wsd = make("wsd", 0, 0.0);
  wsd.decay_fraction = 0.01;
  const LrSchedule twelve(wsd, 1.0, 12);
  EXPECT_EQ(twelve.decay_start(), 11);
  EXPECT_NE(twelve.shortened().find("given one step"), std::string::npos);
}

// The never-decays advice names what helps: when the warmup reaches into the wsd decay, a larger
// decay_fraction changes nothing.
TEST(LrSchedule, TheNeverDecaysAdviceNamesWhatHelps) {
  ScheduleConfig wsd = make("wsd", 19, 0.0);
  wsd.decay_fraction = 0.5;  // the decay would start at 10, but warmup runs to 19
  EXPECT_NE(LrSchedule(wsd, 1.0, 20).never_decays().find("lower schedule.warmup_steps or raise train.steps"),
            std::string::npos);
  wsd = make("wsd", 10, 0.0);
  wsd.decay_fraction = 0.05;
  EXPECT_NE(LrSchedule(wsd, 1.0, 20).never_decays().find("raise schedule.decay_fraction or train.steps"),
            std::string::npos);
}
