// The tokenize, detokenize and apply-chat-template subcommands, run as the mlaserve binary that
// ctest names in MLASERVE_BIN (skipped when the test binary is run without it).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

#include "tokenizer/tiny_tokenizer_test_util.h"
#include "tokenizer/tokenizer_test_util.h"

namespace mlaserve::tokenizer {
namespace {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr
};

CommandResult run_mlaserve(const std::string& arguments) {
  const std::string command = std::string(std::getenv("MLASERVE_BIN")) + " " + arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

class TokenizerCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("MLASERVE_BIN") == nullptr) GTEST_SKIP() << "MLASERVE_BIN is not set";
  }
  std::string input(const std::string& name, const std::string& contents) {
    files_.write(name, contents);
    return (files_.path() / name).string();
  }
  testing::TinyTokenizerDir files_;
  const std::string tokenizer_ = testing::kDeepSeekV3Dir;
};

TEST_F(TokenizerCli, TokenizeAndDetokenize) {
  const std::string strings = input("s.json", R"(["Hello, world!", ""])");
  CommandResult result = run_mlaserve("tokenize --tokenizer " + tokenizer_ + " --input " + strings);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.output, "{\"ids\":[[19923,14,2058,3],[]]}\n");
  result = run_mlaserve("tokenize --add-special-tokens --tokenizer " + tokenizer_ + " --input " +
                        strings);
  EXPECT_EQ(result.output, "{\"ids\":[[0,19923,14,2058,3],[0]]}\n");
  const std::string ids = input("i.json", "[[0, 19923, 14, 2058, 3], []]");
  result = run_mlaserve("detokenize --skip-special-tokens --tokenizer " + tokenizer_ + " --input " +
                        ids);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.output, "{\"texts\":[\"Hello, world!\",\"\"]}\n");
}

TEST_F(TokenizerCli, ApplyChatTemplate) {
  const std::string messages = input("m.json", R"([{"role": "user", "content": "Hi"}])");
  const CommandResult result =
      run_mlaserve("apply-chat-template --add-generation-prompt --tokenizer " + tokenizer_ +
                   " --messages " + messages);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.output, "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>");
}

TEST_F(TokenizerCli, ErrorsAreOneLineAndExitCodeOne) {
  const std::string out_of_range = input("bad.json", "[[1, 999999]]");
  CommandResult result =
      run_mlaserve("detokenize --tokenizer " + tokenizer_ + " --input " + out_of_range);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("token id 999999 is not in the vocabulary"), std::string::npos)
      << result.output;
  result =
      run_mlaserve("tokenize --tokenizer " + tokenizer_ + " --input " + input("n.json", "[1]"));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("item 0 has JSON type number, expected a string"), std::string::npos)
      << result.output;
  result = run_mlaserve("tokenize --tokenizer " + tokenizer_ + " --input /nonexistent.json");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.output.find("cannot open /nonexistent.json"), std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace mlaserve::tokenizer
