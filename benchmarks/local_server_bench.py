"""Issue 33: cairn against a local model server, prompt by prompt: how each one ends.

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 python benchmarks/local_server_bench.py
    python benchmarks/local_server_bench.py --scripted      # a scripted weak model, no server

Runs a fixed set of prompts through real ``cairn -p -o json`` processes (each in a fresh
project and ``CAIRN_HOME``) against the server at ``OPENAI_BASE_URL`` (``OPENAI_MODEL``: the
model, default the first one the server lists; ``OPENAI_API_KEY``: default ``local``), and
prints one row per prompt: its outcome and the time to its honest end.

- **worked**: cairn said the turn succeeded and the answer (or the file it edited) is right;
- **clear error**: cairn ended with a specific error or limit it named (the answer was cut at
  its output bound, the prompt does not fit the window, loop protection, a refused request);
- **wrong**: cairn said the turn succeeded, but the answer is not right (or was cut and called
  complete);
- **crash**: a traceback, output that is not cairn's JSON, or an exit code cairn never uses;
- **hang**: no end within ``--timeout`` seconds (the process is killed).

``--scripted`` starts the scripted server as a weak local model (llama.cpp with an 8192-token
window; a model that never stops, alternates two failing edits, and writes its recap without
tags) so the script itself can be checked without a real server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CAIRN = [sys.executable, "-m", "cairn.cli.main"]
KNOWN_EXIT_CODES = {0, 1, 41, 42, 52, 53, 54, 130}  # cairn.exit_codes.ExitCode
CODE_WORD = "MARKER-ZEBRA-42"
BIG_FILE_PARAGRAPHS = 600  # about 100 KB: 25 k tokens, more than a small local window holds
PARAGRAPH = (
    "The lighthouse keeper climbed the spiral stairs each evening, trimmed the wick, wound the "
    "clockwork that turned the lens, and wrote the weather in a leather logbook. "
)


@dataclass
class Outcome:
    kind: str  # worked | clear error | wrong | crash | hang
    seconds: float
    detail: str = ""


@dataclass
class Case:
    """One prompt: how to set up its project, what to run, and what a right answer is."""

    name: str
    prompts: Sequence[str]  # run one after the other (later ones with --continue)
    check: Callable[[str, Path], bool]  # (the final answer, the project) -> right?
    files: dict[str, str] = field(default_factory=dict)
    flags: Sequence[str] = ()
    settings: dict[str, Any] = field(default_factory=dict)


def _answer_has(*words: str) -> Callable[[str, Path], bool]:
    return lambda answer, _: all(w.lower() in answer.lower() for w in words)


def _file_has(name: str, text: str) -> Callable[[str, Path], bool]:
    return lambda _, project: text in (project / name).read_text()


def _a_recap(answer: str, _: Path) -> bool:
    reasons = ("Not enough conversation", "The model did not", "The model's", "The recap")
    return bool(answer.strip()) and not answer.startswith(reasons)


CASES = [
    Case("capital", ["What is the capital of France? Answer with one word."],
         _answer_has("paris")),
    Case("read-file", ["What is the code word in notes.txt? Read the file to find out."],
         _answer_has(CODE_WORD), files={"notes.txt": f"The code word is {CODE_WORD}.\n"}),
    Case("edit", ["calc.py has a bug: add returns a - b. Fix it so that add returns a + b."],
         _file_has("calc.py", "return a + b"),
         files={"calc.py": "def add(a, b):\n    return a - b\n"},
         flags=["--approval-mode", "auto-edit"]),
    Case("shell", ["Run the shell command `echo BENCH-$((6*7))` and tell me what it printed."],
         _answer_has("BENCH-42"), flags=["--yolo"]),
    Case("long-answer", ["Write the numbers from 1 to 3000, one per line, and nothing else."],
         _answer_has("3000"),
         settings={"model": {"generationConfig": {"maxOutputTokens": {"main": 256}}}}),
    Case("big-file", ["Summarize @big.txt in one sentence."], _answer_has("lighthouse"),
         files={"big.txt": PARAGRAPH * BIG_FILE_PARAGRAPHS}),
    Case("recap", ["I am Ada, porting the config parser to Rust; next I add the tests.",
                   "/recap"], _a_recap),
]  # fmt: skip


def classify(done: subprocess.CompletedProcess[str], case: Case, project: Path) -> Outcome:
    """What a finished ``cairn -p -o json`` run amounts to."""
    if "Traceback (most recent call last)" in done.stderr:
        return Outcome("crash", 0, done.stderr.strip().splitlines()[-1][:80])
    if done.returncode not in KNOWN_EXIT_CODES:
        return Outcome("crash", 0, f"exit code {done.returncode}")
    try:
        result = json.loads(done.stdout)[-1]
    except (ValueError, IndexError, KeyError):
        line = (done.stderr.strip().splitlines() or ["no output"])[-1]
        if done.returncode in (1, 41, 42, 52):  # said on stderr, before any JSON
            return Outcome("clear error", 0, line[:80])
        return Outcome("crash", 0, f"not cairn's JSON: {done.stdout[:60]!r}")
    answer = str(result.get("result") or "")
    if done.returncode != 0 or result.get("is_error"):
        error = (result.get("error") or {}).get("message") or result.get("subtype") or ""
        return Outcome("clear error", 0, f"{result.get('stop_reason')}: {error}"[:80])
    if case.check(answer, project):
        return Outcome("worked", 0, answer.strip().replace("\n", " ")[:60])
    return Outcome("wrong", 0, f"{result.get('stop_reason')}: {answer.strip()[:60]!r}")


def run_case(case: Case, env: dict[str, str], timeout: float) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"cairn-bench-{case.name}-") as folder:
        base = Path(folder)
        project, home = base / "project", base / "home"
        (project / ".git").mkdir(parents=True)
        home.mkdir()
        for name, text in case.files.items():
            (project / name).write_text(text)
        settings = {"memory": {"enableManagedAutoMemory": False}, **case.settings}
        (project / ".cairn").mkdir()
        (project / ".cairn" / "settings.json").write_text(json.dumps(settings))
        run_env = {**env, "CAIRN_HOME": str(home / ".cairn"), "HOME": str(home)}
        started = time.monotonic()
        done: subprocess.CompletedProcess[str] | None = None
        for index, prompt in enumerate(case.prompts):
            args = [*CAIRN, "-p", prompt, "-o", "json", *case.flags]
            if index:
                args.append("--continue")
            left = timeout - (time.monotonic() - started)
            done = _run(args, project, run_env, max(left, 1.0))
            if done is None:
                return Outcome("hang", time.monotonic() - started, f"no end in {timeout:g} s")
            if index < len(case.prompts) - 1 and done.returncode != 0:
                break
        assert done is not None
        outcome = classify(done, case, project)
        outcome.seconds = time.monotonic() - started
        return outcome


def _run(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str] | None:
    """The finished process, or ``None`` when it ran past ``timeout`` (then killed, with its
    children)."""
    process = subprocess.Popen(
        args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def first_model(base_url: str, key: str) -> str:
    request = urllib.request.Request(  # noqa: S310 (a URL the user gave, http or https)
        base_url.rstrip("/") + "/models", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return str(json.load(response)["data"][0]["id"])


def scripted_server() -> Any:
    """A weak local model on the scripted server: llama.cpp serving an 8192-token window."""
    from cairn.testing import (
        RecordedRequest,
        Reply,
        ScriptedServer,
        ToolCallSpec,
        reply,
        tool_call,
        tool_calls,
    )

    def answer(request: RecordedRequest) -> Reply:
        asked = " ".join(request.user_texts())
        results = [m for m in request.messages if m.get("role") == "tool"]
        if request.purpose == "recap":
            return reply("Porting the config parser to Rust. Next: add the tests.")  # no tags
        if "capital of France" in asked or "numbers from 1" in asked:
            return Reply(text="The answer is ", endless=True)  # never emits its end token
        if "code word" in asked:
            if not results:
                return tool_call("read_file", {"file_path": "notes.txt"})
            return reply(f"The code word is {CODE_WORD}.")
        if "calc.py" in asked:  # two edits that never match, alternating: A, B, A | B, A, B
            a = ToolCallSpec("edit", {"file_path": "calc.py", "old_string": "a -  b",
                                      "new_string": "a + b"})  # fmt: skip
            b = ToolCallSpec("edit", {"file_path": "calc.py", "old_string": "a - b ",
                                      "new_string": "a + b"})  # fmt: skip
            answered = sum(m.get("role") == "assistant" for m in request.messages)
            return tool_calls(a, b, a) if answered % 2 == 0 else tool_calls(b, a, b)
        if "echo BENCH" in asked:
            if not results:
                return tool_call("run_shell_command", {"command": "echo BENCH-$((6*7))"})
            return reply(f"It printed {results[-1].get('content', '').strip()}.")
        return reply("Noted.")

    return ScriptedServer(handler=answer, context_window=8192, flavour="llama.cpp").start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per prompt")
    parser.add_argument("--cases", nargs="*", help=f"of {', '.join(c.name for c in CASES)}")
    parser.add_argument("--scripted", action="store_true", help="a scripted weak local model")
    args = parser.parse_args(argv)
    server = scripted_server() if args.scripted else None
    base_url = server.base_url if server else os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        print("Set OPENAI_BASE_URL to the local server (http://127.0.0.1:8080/v1), or pass "
              "--scripted.", file=sys.stderr)  # fmt: skip
        return 2
    key = os.environ.get("OPENAI_API_KEY") or "local"
    try:
        model = os.environ.get("OPENAI_MODEL") or first_model(base_url, key)
        env = {**os.environ, "OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": key,
               "OPENAI_MODEL": model}  # fmt: skip
        chosen = [c for c in CASES if not args.cases or c.name in args.cases]
        print(f"\n{model} at {base_url}, {len(chosen)} prompts, timeout {args.timeout:g} s\n")
        print("| prompt | outcome | time to an honest end | detail |")
        print("|---|---|---|---|")
        for case in chosen:
            outcome = run_case(case, env, args.timeout)
            detail = outcome.detail.replace("|", "/")
            print(f"| {case.name} | {outcome.kind} | {outcome.seconds:.1f} s | {detail} |",
                  flush=True)  # fmt: skip
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    if shutil.which("git") is None:
        print("warning: git is not installed; cairn runs without checkpoints", file=sys.stderr)
    sys.exit(main())
