"""The workspace tasks' tools for a harness: `rlx workspace-tools`.

One child process per harness worker speaks JSON lines (docs/gateway.md,
"Workspace tasks from a harness"): it holds the episode's private copy of
a generated Python project, runs each turn's tool call (@list, @read,
@write, @replace, @run, @submit) in the same bubblewrap sandbox the reward
pool uses, and scores the episode with the hidden tests, which never
leave it. Standard library only.
"""
import json
import os
import shutil
import subprocess


class ToolsFailed(Exception):
    """The tool process died or answered garbage: the episode's machinery failed."""


def find_rlx(given=None):
    """The rlx binary: given, on PATH, or build/tools/rlx of this checkout."""
    if given:
        return given
    on_path = shutil.which("rlx")
    if on_path:
        return on_path
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "build", "tools", "rlx")


class WorkspaceTools:
    def __init__(self, rlx, max_turns):
        self.argv = [rlx, "workspace-tools", "--max-turns", str(max_turns)]
        self.proc = None

    def _start(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)

    def ask(self, op, **fields):
        """One request; its reply. ToolsFailed if the process is gone (it is restarted next time)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self.proc.stdin.write(json.dumps(dict(op=op, **fields)) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            self.close()
            raise ToolsFailed(f"workspace-tools: {e}")
        if not line:
            self.close()
            raise ToolsFailed("workspace-tools exited")
        try:
            reply = json.loads(line)
        except ValueError:
            self.close()
            raise ToolsFailed(f"workspace-tools answered garbage: {line[:80]!r}")
        if not reply.get("ok"):
            raise RuntimeError(f"workspace-tools refused {op}: {reply.get('error')}")
        return reply

    def close(self):
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.kill()
            self.proc.wait()
            self.proc = None
