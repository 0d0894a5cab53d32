// An example topology's header (examples/*.toml): the leading comment
// block says what the example does, how long it takes ("# Takes: ..."),
// what to expect ("# Expect: ...") and, after "# Run, ...", the commands a
// user types, each on a line of its own indented by three spaces (a line
// ending in a backslash goes on in the next).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace rlx::test {

struct ExampleHeader {
  std::string what;   // the description before the first blank comment line
  std::string takes;  // after "Takes:"
  std::string expect; // after "Expect:"
  std::vector<std::string> commands;
};

inline ExampleHeader read_example_header(const std::filesystem::path& file) {
  ExampleHeader h;
  std::ifstream in(file);
  std::string line;
  bool described = false, running = false;
  std::string pending;
  while (std::getline(in, line) && line.starts_with("#")) {
    const std::string text = line.size() > 2 ? line.substr(2) : "";
    if (text.empty()) {
      described = true;
      continue;
    }
    if (!described) {
      h.what += (h.what.empty() ? "" : " ") + text;
    } else if (text.starts_with("Takes:")) {
      h.takes = text.substr(6);
    } else if (text.starts_with("Expect:")) {
      h.expect = text.substr(7);
    } else if (text.starts_with("Run")) {
      running = true;
    } else if (running && text.starts_with("  ")) {
      std::string cmd = text.substr(text.find_first_not_of(' '));
      pending += pending.empty() ? cmd : " " + cmd;
      if (pending.ends_with("\\")) {
        pending.pop_back();
        while (pending.ends_with(" ")) pending.pop_back();
        continue;
      }
      h.commands.push_back(pending);
      pending.clear();
    }
  }
  return h;
}

}  // namespace rlx::test
