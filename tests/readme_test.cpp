// The README's first command and its curl examples, run as the README shows them: the server
// that `./scripts/serve.sh` starts (set-up, build, the built-in brown-tiny model, default flags)
// answers each curl example with English words.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <set>
#include <sstream>

#include "support/command.h"
#include "support/files.h"
#include "support/server_process.h"
#include "support/sse.h"

namespace mlaserve::testing {
namespace {

using nlohmann::json;

// The shell commands of README.md's ```sh blocks, in order, one vector per block: lines
// continued with a backslash joined, comments dropped.
std::vector<std::vector<std::string>> readme_shell_blocks() {
  std::istringstream readme(read_text("README.md"));
  std::vector<std::vector<std::string>> blocks;
  bool inside = false;
  std::string line, command;
  while (std::getline(readme, line)) {
    if (!inside && line == "```sh") {
      inside = true;
      blocks.emplace_back();
    } else if (inside && line.rfind("```", 0) == 0) {
      inside = false;
    } else if (inside) {
      line = line.substr(0, line.find("  #"));
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.pop_back();
      const bool continued = !line.empty() && line.back() == '\\';
      command += continued ? line.substr(0, line.size() - 1) : line;
      if (!continued && !command.empty()) {
        blocks.back().push_back(command);
        command.clear();
      }
    }
  }
  return blocks;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::vector<std::string> lowercase_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (const char c : text + " ") {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      words.push_back(word);
      word.clear();
    }
  }
  return words;
}

// The words of brown-tiny's held-out Brown Corpus text (its reference validation tokens),
// decoded by the server under test.
std::set<std::string> brown_vocabulary(const ServerProcess& server) {
  const json reference = read_json("models/brown-tiny/reference.json");
  const json body = {{"tokens", reference["validation"]["tokens"]}};
  const json text = server.call("/detokenize", &body);
  const auto words = lowercase_words(text.value("text", ""));
  return {words.begin(), words.end()};
}

// Share of the words of `text` that occur in the held-out Brown text. Measured: 40 random
// tokens of brown-tiny's vocabulary score 0.08-0.54 (median 0.32 over 200 draws; most of its
// 4,114 tokens are word pieces), the greedy README completion 0.8 and more, sampled chat
// replies 0.38-0.9 (median 0.69 over 60): only greedy output can be held to a bound.
double english_share(const std::string& text, const std::set<std::string>& vocabulary) {
  const auto words = lowercase_words(text);
  if (words.size() < 5) return 0;
  size_t known = 0;
  for (const auto& w : words) known += vocabulary.count(w);
  return static_cast<double>(known) / static_cast<double>(words.size());
}

// The content of an SSE chat stream: its chunks' delta contents, concatenated.
std::string streamed_content(const std::string& sse) {
  std::string content;
  for (const json& chunk : parse_event_stream(sse).events) {
    for (const auto& choice : chunk["choices"]) content += choice["delta"].value("content", "");
  }
  return content;
}

TEST(Readme, FirstCommandServesTheDemoModelThatAnswersTheCurlExamples) {
  namespace fs = std::filesystem;
  if (!fs::exists("build/src/tools/mlaserve") ||
      !fs::equivalent(mlaserve_bin(), "build/src/tools/mlaserve")) {
    GTEST_SKIP() << "scripts/serve.sh builds and runs build/src/tools/mlaserve; this run tests "
                 << mlaserve_bin();
  }
  const auto blocks = readme_shell_blocks();
  ASSERT_GE(blocks.size(), 2u);
  ASSERT_EQ(blocks[0].size(), 2u) << "README opens with two commands";
  EXPECT_EQ(blocks[0][0], "./scripts/serve.sh");
  EXPECT_EQ(blocks[0][1], "./scripts/test.sh");
  const std::vector<std::string>& curls = blocks[1];
  ASSERT_EQ(curls.size(), 3u) << "completion, chat and streaming chat";

  // The README's server listens on 30000; the test takes a free port instead.
  const ServerProcess server(ServerCommand{blocks[0][0] + " --port 0"}, /*wait_seconds=*/600);
  ASSERT_GT(server.port(), 0);
  const std::set<std::string> vocabulary = brown_vocabulary(server);
  ASSERT_GT(vocabulary.size(), 1000u);
  std::vector<std::string> answers;
  for (const std::string& curl : curls) {
    ASSERT_NE(curl.find("127.0.0.1:30000"), std::string::npos) << curl;
    const auto r = run_command(
        replace_all(curl, "127.0.0.1:30000", "127.0.0.1:" + std::to_string(server.port())));
    ASSERT_EQ(r.exit_code, 0) << curl << "\n" << r.output;
    answers.push_back(r.output);
  }
  const json completion = json::parse(answers[0]);
  const json chat = json::parse(answers[1]);
  // The completion is greedy: brown-tiny's reference continuation of this prompt (float64)
  // starts with these words, and the server's default bfloat16 keeps them.
  const std::string completion_text = completion["choices"][0]["text"];
  EXPECT_EQ(completion_text.rfind(" the last year,", 0), 0u) << completion_text;
  EXPECT_GT(english_share(completion_text, vocabulary), 0.7) << completion_text;
  EXPECT_EQ(completion["usage"]["completion_tokens"], 32);
  // The chats sample (temperature 1, no seed): a reply with words, streamed to the end. A sampled
  // reply may end after a word or two (" U.S." then EOS was seen), so no more is asked of it.
  for (const std::string& reply : {chat["choices"][0]["message"]["content"].get<std::string>(),
                                   streamed_content(answers[2])}) {
    EXPECT_FALSE(lowercase_words(reply).empty()) << reply;
  }
  EXPECT_NE(answers[2].find("data: [DONE]"), std::string::npos) << answers[2];
}

}  // namespace
}  // namespace mlaserve::testing
