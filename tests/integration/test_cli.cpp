// The command line itself (app/): what a user meets before any command runs: a mistyped command is
// named with the nearest one, and the help says what each command does.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace rt = roformer::test;

namespace {

TEST(Cli, AMistypedCommandIsNamedWithTheNearestOne) {
  struct Case {
    std::string args, expected;
  };
  for (const Case& c : {Case{"trian", "unknown command 'roformer trian'; did you mean 'roformer train'?"},
                        Case{"tokenizer trian --input a.txt",
                             "unknown command 'roformer tokenizer trian'; did you mean 'roformer tokenizer train'?"},
                        Case{"config defualts", "did you mean 'roformer config defaults'?"},
                        Case{"bench dta", "did you mean 'roformer bench data'?"},
                        Case{"exprot --checkpoint x", "did you mean 'roformer export'?"}}) {
    const auto r = rt::run_roformer(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  }
  // A command's own words stay its arguments (fill-mask's texts), and options come after commands.
  const auto text = rt::run_roformer("fill-mask --checkpoint /nonexistent 'trian [MASK]'");
  EXPECT_EQ(text.output.find("unknown command"), std::string::npos) << text.output;
}

TEST(Cli, TheHelpNamesEveryCommandWhole) {
  const auto r = rt::run_roformer("--help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* expected : {"`bench data` the data pipeline", "DebertaV2ForMaskedLM for disentangled"})
    EXPECT_NE(r.output.find(expected), std::string::npos) << expected << "\n" << r.output;
}

}  // namespace
