// The agent's tools in a workspace episode (envs/workspace) and the text
// format it calls them in (docs/workspace.md "Tools"). A turn is the
// policy's text up to its first complete call; the call runs on the
// episode's private copy (WorkspaceFiles), and what it returns, cut to a
// budget, is the next observation. A call that cannot be parsed is an
// observation that says why, never an error of the run. CAF-free.
//
//   @list                      files and sizes
//   @read PATH [FIRST-LAST]    numbered lines (at most ToolBudget::read_lines)
//   @write PATH                the lines up to a line "@end" become the file
//   @replace PATH FIRST-LAST   lines FIRST..LAST become the lines up to "@end"
//                              (FIRST-(FIRST-1) inserts before line FIRST)
//   @replace PATH NAME         the body of function NAME (its statements after
//                              the def line and docstring) becomes those lines
//   @run                       the visible tests: python3 run_tests.py tests
//   @submit                    ends the episode; hidden tests decide the reward
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "envs/code/sandbox.hpp"
#include "envs/workspace/workspace_files.hpp"
#include "messages/types.hpp"

namespace rlx {

enum class ToolKind : std::uint8_t { list, read, write, replace, run, submit };
const char* tool_name(ToolKind k);

struct ToolCall {
  ToolKind kind = ToolKind::list;
  std::string path;
  int first = 0, last = 0;  // read / replace: lines, 1-based, inclusive (0: read from the start)
  std::string function;     // replace by name: the function whose body the lines become (first, last unused)
  std::string body;         // write / replace: the lines before "@end", each with its '\n'
};

struct ParsedTurn {
  enum class State : std::uint8_t {
    incomplete,  // no complete call yet: decoding goes on
    call,        // `call` holds it; the turn ends at `end`
    bad,         // a call line that is no call (or none at all in an ended turn): `error` says why
  };
  State state = State::incomplete;
  ToolCall call;
  std::string error;
  std::size_t end = 0;  // bytes of the turn up to and including the call (or the bad line)
};

// The first call in `text`, the policy's turn so far. A one-line call is
// complete with its newline; a write or replace with its "@end" line.
// `ended`: no more text comes (the turn hit its budget, or the policy ended
// its text), so a call still incomplete is bad.
ParsedTurn parse_turn(std::string_view text, bool ended);

struct ToolBudget {
  int read_lines = 60;                  // lines one read returns
  std::size_t observation_bytes = 2000; // an observation is cut to this (run keeps its last line)
};

struct ToolResult {
  std::string observation;
  bool submitted = false;
  bool bad_call = false;    // the call could not run (unparsable, a bad path, past a limit): said in the observation
  // The sandbox's machinery failed during @run (docs/failures.md): the
  // episode's outcome is unknown and it must not be scored.
  InfraFailure failure = InfraFailure::none;
};

// Runs `call` on `files`; @run runs the visible tests in `sandbox`.
ToolResult run_tool(const ToolCall& call, WorkspaceFiles& files, const Sandbox& sandbox, const ToolBudget& budget = {});

// The observation for a turn that held no runnable call.
ToolResult bad_turn(const ParsedTurn& turn);

// Where the body of function `name` lies in a Python file's `lines`: its
// statements after the def line (a signature over several lines ends at
// the first line that ends with ':') and after its docstring, up to the
// last line indented deeper than the def. 1-based lines first..last;
// last = first - 1 when the function has no statement after its docstring
// (replacing it inserts there). Empty when no line defines `name`, or when
// two do (`why` says which).
struct BodyLines {
  int first = 0, last = 0;
  std::string why;  // empty when found
};
BodyLines function_body(const std::vector<std::string>& lines, const std::string& name);

// A file's lines, without their '\n' (a last newline makes no empty line).
std::vector<std::string> split_lines(const std::string& text);

// `text` cut to `bytes`: the head, a marker line, and the last line whole.
std::string cut_output(const std::string& text, std::size_t bytes);

}  // namespace rlx
