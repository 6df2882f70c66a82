// The tokenize, detokenize and apply-chat-template subcommands of the mlaserve binary.
#include <gtest/gtest.h>

#include <fstream>

#include "support/command.h"
#include "support/files.h"
#include "support/tokenizers.h"

namespace mlaserve::testing {
namespace {

CommandResult run_mlaserve(const std::string& arguments) {
  return run_command(mlaserve_bin() + " " + arguments);
}

class TokenizerCli : public ::testing::Test {
 protected:
  // A file `name` in the test's temporary directory holding `contents`; its path.
  std::string input(const std::string& name, const std::string& contents) {
    std::ofstream(files_ / name, std::ios::binary) << contents;
    return (files_ / name).string();
  }
  TempDir files_;
  const std::string tokenizer_ = kDeepSeekV3TokenizerDir;
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
}  // namespace mlaserve::testing
