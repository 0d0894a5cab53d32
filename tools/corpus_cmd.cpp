#include "tools/corpus_cmd.hpp"

#include <chrono>
#include <cstdio>
#include <random>
#include <string_view>

#include "core/files.hpp"
#include "core/progress.hpp"
#include "envs/code/sandbox.hpp"
#include "envs/workspace/workspace_episode.hpp"
#include "explorers/token_eval.hpp"

namespace rlx {

namespace {

void append_lines(std::string_view text, std::string& out) {
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    if (!line.empty()) out.append(line).push_back('\n');
    if (end == std::string_view::npos) break;
    text = text.substr(end + 1);
  }
}

}  // namespace

int corpus_command(const CorpusArgs& a) {
  auto sandbox = Sandbox::open();
  if (!sandbox) {
    std::fprintf(stderr, "rlx corpus: the expert's tools need the sandbox: %s\n", sandbox.error().message.c_str());
    return 2;
  }
  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<std::uint64_t> draw(0, heldout_seed() - 1);  // training tasks only
  std::string text;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < a.tasks; ++i) {
    const auto task = make_workspace_task(TaskSplit::train, draw(rng), 1 + i % 3);
    const Transcript t = expert_transcript(task, *sandbox);
    if (t.failure != InfraFailure::none) {
      std::fprintf(stderr, "rlx corpus: the sandbox failed playing the expert on %s: %s\n", task.id.c_str(),
                   to_string(t.failure));
      return 2;
    }
    append_lines(t.prompt, text);
    for (const auto& part : t.parts) append_lines(part, text);
    if ((i + 1) % 100 == 0 || i + 1 == a.tasks) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string left = i + 1 < a.tasks ? left_text(i + 1, a.tasks, elapsed) : "";
      std::fprintf(stderr, "rlx corpus: %d/%d transcripts, %zu bytes, %s%s%s\n", i + 1, a.tasks, text.size(),
                   human_duration(elapsed).c_str(), left.empty() ? "" : ", ", left.c_str());
    }
  }
  if (auto ok = write_text_atomically(a.out, text); !ok) {
    std::fprintf(stderr, "rlx corpus: %s\n", ok.error().message.c_str());
    return 2;
  }
  return 0;
}

}  // namespace rlx
