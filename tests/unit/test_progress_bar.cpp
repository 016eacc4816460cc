// The terminal progress bar shared by `roformer prepare` and `roformer train`: the exact bytes it
// writes to stderr (redraw in place, fill, clamping, clear and end of line only after a draw).
#include <gtest/gtest.h>

#include "core/progress_bar.h"

using roformer::core::TerminalBar;

namespace {

template <class Fn>
std::string stderr_of(Fn&& fn) {
  testing::internal::CaptureStderr();
  fn();
  return testing::internal::GetCapturedStderr();
}

}  // namespace

TEST(TerminalBar, RedrawsInPlaceFilledToTheFraction) {
  TerminalBar bar(10);
  EXPECT_EQ(stderr_of([&] { bar.draw(0.35, "35% done"); }), "\r\033[K[###.......] 35% done");
  EXPECT_EQ(stderr_of([&] { bar.draw(1.0, "all"); }), "\r\033[K[##########] all");
}

TEST(TerminalBar, ClampsTheFraction) {
  TerminalBar bar(4);
  EXPECT_EQ(stderr_of([&] { bar.draw(2.5, "x"); }), "\r\033[K[####] x");
  EXPECT_EQ(stderr_of([&] { bar.draw(-1.0, "x"); }), "\r\033[K[....] x");
}

TEST(TerminalBar, ClearsAndEndsTheLineOnlyAfterADraw) {
  TerminalBar bar(4);
  EXPECT_EQ(stderr_of([&] { bar.clear(); }), "");
  EXPECT_EQ(stderr_of([&] { bar.end_line(); }), "");
  bar.draw(0.5, "half");
  EXPECT_EQ(stderr_of([&] { bar.clear(); }), "\r\033[K");
  EXPECT_EQ(stderr_of([&] { bar.clear(); }), "") << "a cleared bar is not erased twice";
  stderr_of([&] { bar.draw(0.5, "half"); });
  EXPECT_EQ(stderr_of([&] { bar.end_line(); }), "\n");
  EXPECT_EQ(stderr_of([&] { bar.clear(); }), "") << "a finished line stays on screen";
}
