// The front door holds: README.md and docs/BENCHMARKS.md stay within their
// lengths, no page links to a file that is not there, every `rlx` command
// and option the docs name exists, and `rlx --help` lists the commands the
// README does.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/helpers.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kRoot = RLX_SOURCE_DIR;

std::string page_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::size_t lines_of(const fs::path& p) {
  const auto text = page_text(p);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// The Markdown pages a reader meets: the root's and every one under docs/.
std::vector<fs::path> pages() {
  std::vector<fs::path> out;
  for (const char* f : {"README.md", "CONTRIBUTING.md"}) out.push_back(kRoot / f);
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "docs"))
    if (e.path().extension() == ".md") out.push_back(e.path());
  return out;
}

// GitHub's anchor of a heading: lower case, punctuation dropped, spaces
// as hyphens.
std::string anchor_of(const std::string& heading) {
  std::string out;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_') out += static_cast<char>(std::tolower(c));
    else if (c == ' ') out += '-';
  }
  return out;
}

// The anchors of a page's headings.
std::set<std::string> anchors(const fs::path& page) {
  std::set<std::string> out;
  std::istringstream in(page_text(page));
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("#")) out.insert(anchor_of(line.substr(line.find_first_not_of('#') + 1)));
  return out;
}

// The reference pages (what says how things work now): not docs/results/.
bool reference(const fs::path& page) { return page.string().find("/docs/results/") == std::string::npos; }

// `rlx`'s output for `args`.
std::string rlx_output(const std::string& args) { return rlx::test::run_command(RLX_BINARY " " + args + " 2>&1").out; }

// The subcommands `rlx --help` lists.
std::set<std::string> subcommands() {
  std::set<std::string> out;
  const auto help = rlx_output("--help");
  const auto at = help.find("Subcommands:");
  REQUIRE(at != std::string::npos);
  std::istringstream in(help.substr(at));
  std::string line;
  std::getline(in, line);
  const std::regex row("^  ([a-z][a-z-]*) +\\S.*$");
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, row)) out.insert(m[1]);
  return out;
}

}  // namespace

TEST_CASE("README.md stays an entry point of at most 150 lines and docs/BENCHMARKS.md at most 400", "[docs]") {
  CHECK(lines_of(kRoot / "README.md") <= 150);
  CHECK(lines_of(kRoot / "docs" / "BENCHMARKS.md") <= 400);
  // Current figures, not a diary: no commit ids or dates in the README.
  const auto readme = page_text(kRoot / "README.md");
  CHECK_FALSE(std::regex_search(readme, std::regex("20[0-9][0-9]-[01][0-9]-[0-3][0-9]")));
  CHECK_FALSE(std::regex_search(readme, std::regex("\\b(code|commit) [0-9a-f]{7,}\\b")));
  CHECK(fs::exists(kRoot / "LICENSE"));
  CHECK(fs::exists(kRoot / "CONTRIBUTING.md"));
}

TEST_CASE("no page links to a file that does not exist", "[docs]") {
  const std::regex link("\\]\\(([^)#\\s]+)(#[^)]*)?\\)");
  // A file of the repository named in a reference page's text: docs/x.md,
  // examples/y.toml, bench/z.sh and the like.
  const std::regex named("(?:^|[\\s(`\"])((?:docs|examples|bench|tools|tests|fuzz|cmake)/[A-Za-z0-9_./-]*"
                         "\\.(?:md|toml|sh|py|png|json|bin|vocab|capnp|cpp|hpp|mjs))");
  int checked = 0;
  for (const auto& page : pages()) {
    const auto text = page_text(page);
    for (std::sregex_iterator m(text.begin(), text.end(), link), end; m != end; ++m) {
      const std::string target = (*m)[1];
      if (target.find("://") != std::string::npos || target.starts_with("mailto:")) continue;
      INFO(page.string() << " links to " << target << (*m)[2]);
      CHECK(fs::exists(page.parent_path() / target));
      if ((*m)[2].matched && target.ends_with(".md"))
        CHECK(anchors(page.parent_path() / target).count(std::string((*m)[2]).substr(1)));
      ++checked;
    }
    if (!reference(page)) continue;
    for (std::sregex_iterator m(text.begin(), text.end(), named), end; m != end; ++m) {
      const std::string target = (*m)[1];
      INFO(page.string() << " names " << target);
      CHECK(fs::exists(kRoot / target));
      ++checked;
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("rlx --help lists every command the README does, each with one line, and --version names the commit",
          "[docs][tools]") {
  const auto subs = subcommands();
  const auto readme = page_text(kRoot / "README.md");
  std::set<std::string> in_readme;
  const std::regex command("rlx ([a-z][a-z-]+)");
  for (std::sregex_iterator m(readme.begin(), readme.end(), command), end; m != end; ++m) in_readme.insert((*m)[1]);
  for (const auto& s : subs) {
    INFO("rlx " << s << " is missing from README.md");
    CHECK(in_readme.count(s));
  }
  for (const auto& s : in_readme) {
    INFO("README.md names rlx " << s << ", which rlx --help does not list");
    CHECK(subs.count(s));
  }
  CHECK(subs.size() >= 15);
  const auto version = rlx_output("--version");
  CHECK(std::regex_search(version, std::regex("^rlx [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit ([0-9a-f]{7,}(-dirty)?|unknown)"
                                              "\\), memory: ")));
}

TEST_CASE("every rlx option a page names is one its command takes", "[docs][tools]") {
  const auto subs = subcommands();
  std::map<std::string, std::string> help;
  for (const auto& s : subs) help[s] = rlx_output(s + " --help");
  // `rlx SUB ... --option` within one line of a page (a code span, a
  // command line or a sentence).
  const std::regex use("rlx ([a-z][a-z-]+)([^\\n`|]*)");
  const std::regex option("(^|\\s)(--[a-z][a-z-]*)");
  int checked = 0;
  for (const auto& page : pages()) {
    if (!reference(page)) continue;
    const auto text = page_text(page);
    for (std::sregex_iterator m(text.begin(), text.end(), use), end; m != end; ++m) {
      const std::string sub = (*m)[1], rest = (*m)[2];
      if (!help.count(sub)) continue;
      for (std::sregex_iterator o(rest.begin(), rest.end(), option), oend; o != oend; ++o) {
        const std::string opt = (*o)[2];
        if (opt == "--help") continue;
        INFO(page.string() << ": rlx " << sub << " " << opt);
        CHECK(help[sub].find(opt) != std::string::npos);
        ++checked;
      }
    }
  }
  CHECK(checked > 30);
}
