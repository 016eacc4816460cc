// The live one-line progress bar on a terminal, redrawn in place on stderr: "[#####.....] <text>".
// One drawing implementation behind `roformer prepare`'s bar and `roformer train`'s bar; each
// caller decides whether to draw (a terminal, or an explicit mode) and what the text says.
#pragma once

#include <string>

namespace roformer::core {

// True when stderr is a terminal (a bar can be redrawn there; elsewhere callers log lines).
bool stderr_is_terminal();

class TerminalBar {
 public:
  explicit TerminalBar(int width) : width_(width) {}
  // Redraws the line: the bar filled to `fraction` (clamped to [0, 1]), a space, then `text`.
  void draw(double fraction, const std::string& text);
  // Erases a drawn bar so other log lines print cleanly; nothing when none is drawn.
  void clear();
  // Leaves the drawn bar on screen and moves to the next line.
  void end_line();

 private:
  int width_;           // characters between the brackets
  bool drawn_ = false;  // a bar is on the current line
};

}  // namespace roformer::core
