"""Memory you can trust (issue 27): stale memories flagged, current ones recalled, forgotten
ones staying forgotten, and what the evidence check costs.

Usage (from the repository root)::

    .venv/bin/python benchmarks/memory_trust_bench.py                 # everything
    .venv/bin/python benchmarks/memory_trust_bench.py --scenario      # (a) and (b) only
    .venv/bin/python benchmarks/memory_trust_bench.py --cost --memories 1000

(a) Staleness. A seeded git repository and scripted multi-session histories on a real
``Runtime`` (the scripted model plays the user's assistant and the extraction agent, which saves
each fact the user states with the files it is about as evidence). Between sessions the repository
changes as projects do: the test target is renamed, a module moves, a convention changes, a
decision is reverted, unrelated files change and a file is rewritten with the same content.
Then every fact is asked about in a new session, through Recall as a turn runs it: the share of
stale memories delivered marked possibly stale, of current memories marked (false alarms), and of
current facts recalled (in the fast phase: what the first request gets). A second session tells
the new test command; its extraction supersedes the memory, which is current again.

(b) Forgetting. "I always indent with tabs", extracted, then ``/forget the tabs rule``, then 20
more turns, each extracted by an agent that saves the tabs rule whenever the user's statement is
in its window: memories resurrected (with tombstones, and with the tombstones removed after the
forget, as before issue 27), then the user states it again and it is saved.

(c) Cost. The evidence check per recalled memory (each with 2 evidence files of 2-40 KB), cold
(a new session, provenance not read yet) and warm; and Recall's fast phase (refresh, rank, check,
render of the top two) on a pool of memories with evidence, with the check and without it.

The README next to this file records the figures, the command and the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESURRECTION_TURNS = 20  # Extract runs after the forget
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **_GIT_ENV}, capture_output=True, check=True
    )
    return done.stdout.decode()


# --- the project -----------------------------------------------------------------------------

SEED = {
    "Makefile": "test:\n\tpytest -q\n\nrelease:\n\t./scripts/release.sh\n",
    "src/billing/pay.py": "def pay(amount):\n    return charge(amount)\n",
    ".editorconfig": "root = true\n\n[*.py]\nindent_style = space\nindent_size = 4\n",
    "docs/decisions/cache.md": "# Cache\n\nDecision: the cache is SQLite (2026-01-10).\n",
    "src/app/main.py": "from app import create\n\napp = create()\n",
    "pyproject.toml": '[tool.ruff]\nline-length = 100\n\n[project]\nname = "shop"\n',
    ".github/workflows/ci.yml": "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n",
    "README.md": "# Shop\n",
}


@dataclass(frozen=True)
class Fact:
    key: str
    said: str  # what the user says in session 1
    title: str
    body: str
    evidence: tuple[str, ...]  # workspace files
    query: str  # how a later prompt asks about it
    changes: bool  # its evidence changes between the sessions
    type: str = "project"
    scope: str = "project"


FACTS = (
    Fact("test-command", "We run the tests with make test.", "Test command is make test",
         "Run the tests with `make test` (defined in the Makefile).", ("Makefile",),
         "how do I run the tests with make", changes=True),
    Fact("payments-module", "The payments code lives in src/billing/pay.py.",
         "Payments code lives in src/billing/pay.py",
         "The payment logic is in `src/billing/pay.py`.", ("src/billing/pay.py",),
         "where is the payments code", changes=True),
    Fact("indentation", "Our convention is 4-space indentation, see .editorconfig.",
         "Python indentation is 4 spaces", "Indent Python with 4 spaces (.editorconfig).",
         (".editorconfig",), "which indentation convention for python", changes=True),
    Fact("cache-decision", "We decided the cache is SQLite.", "The cache is SQLite",
         "Decision: the cache uses SQLite (docs/decisions/cache.md).",
         ("docs/decisions/cache.md",), "which database does the cache use decision",
         changes=True),
    Fact("entry-point", "The app starts in src/app/main.py.", "App entry point is src/app/main.py",
         "The application is created in `src/app/main.py`.", ("src/app/main.py",),
         "where does the app start entry point", changes=False),
    Fact("lint", "We lint with ruff, line length 100.", "Lint with ruff at line length 100",
         "Lint with ruff; lines up to 100 characters (pyproject.toml).", ("pyproject.toml",),
         "lint line length ruff", changes=False),
    Fact("ci", "CI runs on GitHub Actions.", "CI runs on GitHub Actions",
         "CI is GitHub Actions (.github/workflows/ci.yml).", (".github/workflows/ci.yml",),
         "what runs our CI pipeline github", changes=False),
    Fact("uv", "I prefer uv over pip.", "Prefers uv over pip", "Install packages with uv.",
         (), "install packages with uv or pip", changes=False, type="feedback", scope="user"),
)  # fmt: skip
NEW_TEST_COMMAND = "The test command is now make check."


def change_the_project(repo: Path) -> None:
    """What happens between the sessions: four facts go stale, the rest of the tree moves too."""
    (repo / "Makefile").write_text(SEED["Makefile"].replace("test:", "check:"))
    (repo / "src/payments").mkdir(parents=True)
    git(repo, "mv", "src/billing/pay.py", "src/payments/pay.py")
    (repo / ".editorconfig").write_text(SEED[".editorconfig"].replace("space", "tab"))
    (repo / "docs/decisions/cache.md").write_text(
        SEED["docs/decisions/cache.md"] + "\nReverted 2026-02-01: the cache is Redis.\n"
    )
    (repo / "README.md").write_text("# Shop\n\nAn online shop.\n")  # unrelated changes
    (repo / "src/app/util.py").write_text("def helper(): ...\n")
    (repo / "pyproject.toml").write_text(SEED["pyproject.toml"])  # rewritten, same content
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second week")


def memory_text(fact: Fact, *, evidence: bool = True) -> str:
    lines = ["---", f"name: {fact.title}", f"description: {fact.title}", f"type: {fact.type}"]
    if fact.evidence and evidence:
        lines.append(f"evidence: [{', '.join(fact.evidence)}]")
    return "\n".join([*lines, "---", "", fact.body, "", "Why: the user said so.", ""])


# --- the scripted model ----------------------------------------------------------------------


class Model:
    """The scripted model: the assistant answers "Noted.", the extraction agent saves what the
    user's newest message states (and, in the forgetting run, the tabs rule whenever the user's
    statement is in its window), the forget selector names the tabs memory."""

    def __init__(self, project_root: Path, user_root: Path) -> None:
        self.project_root = project_root
        self.user_root = user_root
        self.tabs_mode = False
        self.tab_attempts = 0

    def __call__(self, request: Any) -> Any:
        from cairn.content import FunctionResponse
        from cairn.memory.background.extract import EXTRACT_TASK
        from cairn.testing import ToolCallSpec, reply, tool_call, tool_calls

        if request.purpose == "forget":
            return reply(json.dumps({"selected_ids": ["user:feedback/tabs.md"]}))
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        if request.purpose != "extract":
            return reply("Noted.")
        answered = [p for p in request.contents[-1].parts if isinstance(p, FunctionResponse)]
        if answered and answered[0].name == "read_file":  # superseding: read, then update
            updated = memory_text(FACTS[0]).replace("make test", "make check")
            return tool_call(
                "write_file", {"file_path": str(self.test_command), "content": updated}
            )
        if answered:
            return reply("Saved.")
        users = [c.text for c in request.contents if c.role == "user" and c.text != EXTRACT_TASK]
        if users and NEW_TEST_COMMAND in users[-1]:
            return tool_call("read_file", {"file_path": str(self.test_command)})
        writes = self._writes(users)
        if not writes:
            return reply("Nothing to save.")
        return tool_calls(
            *(ToolCallSpec("write_file", {"file_path": str(p), "content": t}) for p, t in writes)
        )

    @property
    def test_command(self) -> Path:
        return self.project_root / "project" / f"{FACTS[0].key}.md"

    def _writes(self, users: list[str]) -> list[tuple[Path, str]]:
        newest = users[-1] if users else ""
        if self.tabs_mode:
            if not any("indent with tabs" in text for text in users):
                return []
            self.tab_attempts += 1
            text = "---\nname: Indent with tabs\ndescription: The user always indents with tabs\n"
            text += "type: feedback\n---\n\nAlways indent with tabs.\n"
            return [(self.user_root / "feedback" / f"tabs-{self.tab_attempts}.md", text)]
        for fact in FACTS:
            if fact.said in newest:
                root = self.project_root if fact.scope == "project" else self.user_root
                return [(root / fact.type / f"{fact.key}.md", memory_text(fact))]
        return []


# --- (a) and (b): the scenario -----------------------------------------------------------------


class World:
    def __init__(self, base: Path) -> None:
        from cairn.config.settings import Settings
        from cairn.session.runtime import Runtime
        from cairn.testing import ScriptedProvider

        os.environ["CAIRN_HOME"] = str(base / "home")  # each world its own user memory
        self.repo = base / "shop"
        self.repo.mkdir(parents=True)
        git(self.repo, "init", "-q", "-b", "main")
        for name, text in SEED.items():
            (self.repo / name).parent.mkdir(parents=True, exist_ok=True)
            (self.repo / name).write_text(text)
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "first week")
        settings = Settings.model_validate({"memory": {"minAvailableMemoryMb": 0}})
        self.provider = ScriptedProvider()
        self.runtime = Runtime(
            cwd=self.repo, settings=settings, provider=self.provider, record_chats=False
        )
        self.manager = self.runtime.memory_manager()
        roots = self.manager.roots
        assert roots.project is not None
        self.model = Model(roots.project, roots.user)
        self.provider.handler = self.model

    async def say(self, session: Any, text: str) -> None:
        from cairn.session.session import PromptRequest

        async def ignore(event: object) -> None:
            return None

        await session.prompt(PromptRequest(text), ignore)
        await self.manager.drain(60)

    async def ask_all(self, session_id: str, facts: list[Fact]) -> dict[str, Any]:
        """Recall every fact's query in a new session, as a turn's Recall does."""
        from cairn.abort import AbortController

        found: dict[str, Any] = {}
        for fact in facts:
            fast: list[Any] = []
            await self.manager.recall(
                fact.query,
                provider=None,
                excluded=frozenset(),
                recent_tools=(),
                abort=AbortController().signal,
                on_fast_result=fast.append,
                session_id=session_id,
            )
            docs = fast[0].docs if fast else []
            prompt = fast[0].prompt if fast else ""
            mine = [d for d in docs if d.relative_path == f"{fact.type}/{fact.key}.md"]
            found[fact.key] = (mine[0] if mine else None, prompt)
        return found


def score(found: dict[str, Any], stale: set[str]) -> dict[str, Any]:
    stale_recalled = [k for k in stale if found[k][0] is not None]
    flagged = [
        k for k in stale_recalled
        if found[k][0].staleness is not None and found[k][0].staleness.state == "stale"
        and "POSSIBLY STALE" in found[k][1]
    ]  # fmt: skip
    current = [k for k in found if k not in stale]
    recalled = [k for k in current if found[k][0] is not None]
    false_alarms = [k for k in recalled if found[k][0].staleness is not None]
    return {
        "stale": len(stale), "stale_recalled": len(stale_recalled), "flagged": len(flagged),
        "current": len(current), "current_recalled": len(recalled),
        "false_alarms": len(false_alarms),
        "unflagged": sorted(set(stale_recalled) - set(flagged)), "alarms": sorted(false_alarms),
        "missed": sorted(set(current) - set(recalled)),
    }  # fmt: skip


async def staleness_scenario(base: Path) -> list[dict[str, Any]]:
    world = World(base)
    first = world.runtime.new_session()
    for fact in FACTS:
        await world.say(first, fact.said)
    await first.close()
    change_the_project(world.repo)
    stale = {fact.key for fact in FACTS if fact.changes}
    rows = [
        {"checkpoint": "after the changes", **score(await world.ask_all("a", list(FACTS)), stale)}
    ]
    second = world.runtime.new_session()
    await world.say(second, NEW_TEST_COMMAND)
    await second.close()
    stale.discard("test-command")  # superseded: learned again, its evidence recorded anew
    rows.append(
        {
            "checkpoint": "after the new test command",
            **score(await world.ask_all("b", list(FACTS)), stale),
        }
    )
    await world.runtime.aclose()
    return rows


async def forgetting_scenario(base: Path, *, keep_tombstones: bool) -> dict[str, int]:
    from cairn.memory.forget.tombstones import TOMBSTONES_FILE_NAME

    world = World(base)
    world.model.tabs_mode = True
    user_feedback = world.manager.roots.user / "feedback"
    session = world.runtime.new_session()
    await world.say(session, "I always indent with tabs.")
    saved = len(list(user_feedback.glob("tabs-*.md")))
    for path in sorted(user_feedback.glob("tabs-*.md")):
        path.rename(path.with_name("tabs.md"))  # the forget selector names feedback/tabs.md
    world.manager.reindex()
    await world.say(session, "/forget the tabs rule")
    if not keep_tombstones:
        (world.manager.roots.user / TOMBSTONES_FILE_NAME).unlink(missing_ok=True)
    attempts_before = world.model.tab_attempts
    resurrected = 0
    for turn in range(RESURRECTION_TURNS):
        await world.say(session, f"Next step {turn}: look at the parser.")
        resurrected = max(resurrected, len(list(user_feedback.glob("tabs*.md"))))
    attempts = world.model.tab_attempts - attempts_before
    await world.say(session, "Once more: I always indent with tabs, keep that.")
    restated = len(list(user_feedback.glob("tabs*.md"))) - resurrected
    await session.close()
    await world.runtime.aclose()
    return {"saved": saved, "attempts": attempts, "resurrected": resurrected, "restated": restated}


# --- (c) cost ----------------------------------------------------------------------------------


def build_pool(base: Path, memories: int) -> tuple[Path, Any]:
    """A git repository of ``memories`` x 2 source files and a memory per pair, stamped."""
    from cairn.config.settings import Settings
    from cairn.memory.manager import MemoryManager
    from cairn.memory.trust.provenance import Author, stamp

    repo = base / "pool"
    rng = random.Random(27)
    for i in range(memories):
        for part in ("a", "b"):
            path = repo / "src" / f"mod{i // 50}" / f"f{i}{part}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            size = rng.randint(2_000, 40_000)
            path.write_text(("x = 1  # filler line of source code\n" * (size // 36 + 1))[:size])
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "pool")
    old = time.time() - 3600
    for path in repo.rglob("*.py"):
        os.utime(path, (old, old))  # older than the racy window: a stat can stand for it
    settings = Settings.model_validate({"memory": {"minAvailableMemoryMb": 0}})
    manager = MemoryManager(repo, settings=settings, environ={**os.environ})
    root = manager.roots.project
    assert root is not None
    author = Author("extract", "bench", 1, manager.workspace, root)
    words = ["billing", "deploy", "parser", "cache", "search", "auth", "queue", "report"]
    for i in range(memories):
        topic = f"{words[i % len(words)]} {words[(i // 8) % len(words)]} module {i}"
        text = (
            f"---\nname: {topic}\ndescription: how the {topic} works\ntype: project\n"
            f"evidence: [src/mod{i // 50}/f{i}a.py, src/mod{i // 50}/f{i}b.py]\n---\n\n"
            f"The {topic} is implemented in f{i}a.py and f{i}b.py.\n"
        )
        path = root / "project" / f"m{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(stamp(text, previous=None, author=author, path=path).content)
    manager.reindex()
    return repo, manager


BIG_EVIDENCE_BYTES = 4 * 1024 * 1024


def _big_evidence(manager: Any) -> Any:
    """A memory whose evidence is one 4 MiB file (a generated schema, a lock file)."""
    from cairn.memory.trust.provenance import Author, stamp

    big = manager.workspace / "schema.sql"
    big.write_bytes(b"CREATE TABLE t (id int);\n" * (BIG_EVIDENCE_BYTES // 25))
    old = time.time() - 3600
    os.utime(big, (old, old))
    root = manager.roots.project
    path = root / "project" / "schema.md"
    text = (
        "---\nname: Schema\ndescription: the schema\ntype: project\n"
        "evidence: [schema.sql]\n---\n\nThe schema is generated.\n"
    )
    author = Author("extract", "bench", 1, manager.workspace, root)
    path.write_text(stamp(text, previous=None, author=author, path=path).content)
    [doc] = [d for d in manager.docs() if d.relative_path == "project/schema.md"]
    return doc


def check_cost(manager: Any, runs: int) -> dict[str, float]:
    from cairn.memory.trust import provenance
    from cairn.memory.trust.staleness import EvidenceCheck

    docs = manager.docs()
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(runs):
        provenance._cache.clear()  # a new process: no provenance read yet
        check = EvidenceCheck(manager.workspace)  # a new session: no file hashed yet
        for doc in docs:
            started = time.perf_counter()
            check.staleness(doc)
            cold.append(time.perf_counter() - started)
        for doc in docs:
            started = time.perf_counter()
            check.staleness(doc)
            warm.append(time.perf_counter() - started)
    big = _big_evidence(manager)
    big_cold: list[float] = []
    for _ in range(runs):
        provenance._cache.clear()
        check = EvidenceCheck(manager.workspace)
        started = time.perf_counter()
        check.staleness(big)
        big_cold.append(time.perf_counter() - started)
    return {
        "big_cold_ms": statistics.median(big_cold) * 1000,
        "cold_median_ms": statistics.median(cold) * 1000,
        "cold_p95_ms": statistics.quantiles(cold, n=20)[18] * 1000,
        "warm_median_ms": statistics.median(warm) * 1000,
        "warm_p95_ms": statistics.quantiles(warm, n=20)[18] * 1000,
    }


async def fast_phase(manager: Any, runs: int, *, marks: bool) -> dict[str, float]:
    from cairn.abort import AbortController
    from cairn.memory.recall.query import recall_memories
    from cairn.memory.trust import provenance
    from cairn.memory.trust.staleness import EvidenceCheck

    queries = ["how does the billing deploy module work", "parser cache module", "auth queue"]
    firsts: list[float] = []
    later: list[float] = []
    for run in range(runs):
        provenance._cache.clear()
        check = EvidenceCheck(manager.workspace)
        for n, query in enumerate(queries * 3):
            published: list[float] = []
            started = time.perf_counter()
            await recall_memories(
                manager.store, query, provider=None, excluded=frozenset(), recent_tools=(),
                abort=AbortController().signal, now=time.time,
                on_fast_result=lambda _r, out=published: out.append(time.perf_counter()),
                marks=check.mark if marks else None,
            )  # fmt: skip
            elapsed = (published[0] if published else time.perf_counter()) - started
            (firsts if n == 0 else later).append(elapsed)
        del run
    return {
        "first_ms": statistics.median(firsts) * 1000,
        "warm_ms": statistics.median(later) * 1000,
    }


# --- output ------------------------------------------------------------------------------------


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f} % ({part}/{whole})" if whole else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scenario", action="store_true", help="only (a) and (b)")
    parser.add_argument("--cost", action="store_true", help="only (c)")
    parser.add_argument("--memories", type=int, default=1_000, help="pool size for (c)")
    parser.add_argument("--runs", type=int, default=5, help="repetitions for (c)")
    args = parser.parse_args()
    both = not (args.scenario or args.cost)
    base = Path(tempfile.mkdtemp(prefix="memtrust-bench-"))
    os.environ["CAIRN_HOME"] = str(base / "home")
    for name in ("CAIRN_MEMORY_LOCAL", "CAIRN_MEMORY_BASE_DIR", "CAIRN_MEMORY_PROJECT_SCOPE"):
        os.environ.pop(name, None)
    print(f"load: {os.getloadavg()[0]:.1f} (1 min)")
    try:
        if both or args.scenario:
            rows = asyncio.run(staleness_scenario(base / "a"))
            print("\n(a) staleness: every fact asked about in a new session (fast phase)")
            print("| checkpoint | stale memories flagged | current memories marked stale | "
                  "current facts recalled |")  # fmt: skip
            print("|---|---|---|---|")
            for row in rows:
                print(f"| {row['checkpoint']} | {pct(row['flagged'], row['stale_recalled'])} | "
                      f"{pct(row['false_alarms'], row['current_recalled'])} | "
                      f"{pct(row['current_recalled'], row['current'])} |")  # fmt: skip
                for key in ("unflagged", "alarms", "missed"):
                    if row[key]:
                        print(f"  {key}: {', '.join(row[key])}")
            print(f"\n(b) forgetting: {RESURRECTION_TURNS} Extract runs after /forget")
            print("| tombstones | agent tried to save it again | forgotten fact re-saved | "
                  "saved again when stated again |")  # fmt: skip
            print("|---|---|---|---|")
            for keep in (True, False):
                found = asyncio.run(forgetting_scenario(base / f"b-{keep}", keep_tombstones=keep))
                label = "kept (issue 27)" if keep else "removed after the forget (before)"
                print(f"| {label} | {found['attempts']} | {found['resurrected']} | "
                      f"{'yes' if found['restated'] >= 1 else 'no'} |")  # fmt: skip
        if both or args.cost:
            _repo, manager = build_pool(base / "c", args.memories)
            cost = check_cost(manager, args.runs)
            print(f"\n(c) evidence check per recalled memory ({args.memories} memories, 2 "
                  f"evidence files of 2-40 KB each; {args.runs} runs)")  # fmt: skip
            print("| | median | p95 |")
            print("|---|---|---|")
            print(f"| cold (new session, provenance unread) | {cost['cold_median_ms']:.3f} ms | "
                  f"{cost['cold_p95_ms']:.3f} ms |")  # fmt: skip
            print(f"| warm (same session) | {cost['warm_median_ms']:.3f} ms | "
                  f"{cost['warm_p95_ms']:.3f} ms |")  # fmt: skip
            print(f"| cold, one 4 MiB evidence file | {cost['big_cold_ms']:.3f} ms | |")
            without = asyncio.run(fast_phase(manager, args.runs, marks=False))
            with_check = asyncio.run(fast_phase(manager, args.runs, marks=True))
            print(f"\nRecall's fast phase on {args.memories} memories with evidence (call to "
                  "published fast result, medians)")  # fmt: skip
            print("| | first recall of a session | later recalls |")
            print("|---|---|---|")
            print(f"| without the evidence check | {without['first_ms']:.2f} ms | "
                  f"{without['warm_ms']:.2f} ms |")  # fmt: skip
            print(f"| with the evidence check | {with_check['first_ms']:.2f} ms | "
                  f"{with_check['warm_ms']:.2f} ms |")  # fmt: skip
            manager.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
