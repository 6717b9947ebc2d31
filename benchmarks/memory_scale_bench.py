"""Memory at any size (issue #28): the issue's table for 1,000 / 10,000 / 100,000 memories.

Usage (from the repository root; the PostgreSQL rows need the server binaries, see
.ci/system-packages)::

    .venv/bin/python benchmarks/memory_scale_bench.py
    .venv/bin/python benchmarks/memory_scale_bench.py --sizes 1000,10000 --postgres 0

For each size, a project and a user memory folder are filled with generated memories of
realistic size (three quarters project, a quarter user; the four types; a 300-900 byte body of
words from a 5,000-word vocabulary, so terms repeat as in real text), laid out as cairn keeps
them (``$CAIRN_HOME``), and every figure is measured in fresh processes:

- **first scan, no index**: a process opens the store and reads every file (worker processes
  for a large folder), then saves the index; wall, CPU (the process and its workers) and peak
  RSS (the largest of the process and any one worker);
- **start with a saved index**: a new process opens the store and answers one fast-phase query
  (``refresh(provisional=True)`` then ``rank``: what Recall's first fast phase does), from the
  store's creation to the result (interpreter start and imports excluded), wall and CPU;
- **warm fast-phase rank**: in that process, ``--queries`` queries of ``refresh`` + ``rank``,
  median and p95;
- **one Extract write**: in that process, ``--writes`` locked write sections as Extract's
  ``write_file`` makes them (a new memory file, ``MEMORY.md`` rebuilt, the index saved),
  median and p95;
- **cairn memory list**: the real command (``cairn memory list``, output to a pipe): the first
  line of output (the first page) and the whole listing;
- **show, search, forget**: ``cairn memory show`` of a memory by its path and by its title,
  ``search`` and ``forget <title> --yes`` (the substring match: no model endpoint; each forget
  undone by an untimed ``cairn memory restore``), each a whole command in a new process, with
  ``cairn memory path`` (the start-up alone) beside them: medians of ``--cli-runs``, wall and
  CPU (bytecode compiled first, as an installed cairn has it);
- **index on disk**: the ``recall-index`` folders after all of the above.

With ``--postgres N`` (default 10,000; 0 skips), a throw-away PostgreSQL cluster
(``cairn.testing.postgres``) holds N memories in one namespace, and the script measures one
Extract write (median, p95), how long until another machine's process finds a memory written
(by notification; median, max), the first local search of a process on a fresh machine (an
empty mirror: the whole namespace pulled and indexed), against the same on files, and a fresh
machine's first turn (``--fresh-runs`` of them, each on an empty mirror, against an indexed
files memory): the first model request's delay from the prompt, Recall's fast delivery (from
telemetry), whether the request carried a memory, and the background warm-up's whole time.
``--writes 0`` measures the fresh machine alone (``--sizes ""`` skips the files table).

``--work DIR`` keeps the generated memories in DIR and reuses them on the next run (their saved
index is removed first, so the first scan is one again); ``--cli-only`` measures show, search and
forget alone, on the saved index, e.g.
``--work /tmp/scale --sizes 100000 --postgres 0 --cli-only --cli-runs 3``; add
``--baseline /other/tree/src`` to run each command on that tree too, right after this one's.

After the table, the 100,000 column against the issue's targets (files): target, measured,
met ("well under a second" for show, search and forget is read as < 1 s wall here). The wall
figures are the targets' unit; read them on an idle machine (CPU times beside them hold better
under load).

The README next to this file records the figures, the command, the date and the load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TYPES = ("user", "feedback", "project", "reference")
QUERY_WORDS = ("deploy", "billing", "pytest", "docker", "release", "schema", "login", "cache")

_CHILD = r"""
import json, os, resource, statistics, sys, time
from pathlib import Path
from cairn.memory.paths import memory_roots
from cairn.memory.store.locks import hold_roots
from cairn.memory.store.memory_store import MemoryStore

mode, project = sys.argv[1], Path(sys.argv[2])
roots = memory_roots(project)

def usage():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    return cpu, max(own.ru_maxrss, kids.ru_maxrss) / 1024

if mode == "scan":
    started = time.perf_counter()
    store = MemoryStore(roots)
    report = store.refresh()
    store.save()
    store.close()
    wall = time.perf_counter() - started
    cpu, rss = usage()
    print(json.dumps({"wall": wall, "cpu": cpu, "rss": rss, "docs": report.docs}))
elif mode == "warm":
    queries, writes = int(sys.argv[3]), int(sys.argv[4])
    words = json.loads(sys.argv[5])
    started, cpu_started = time.perf_counter(), time.process_time()
    store = MemoryStore(roots)
    store.refresh(provisional=True)
    hits = store.rank("how do we deploy the billing service", limit=5)
    first = time.perf_counter() - started
    first_cpu = time.process_time() - cpu_started  # (the validation walk's thread included)
    assert hits, "no result"
    store.refresh()
    ranks = []
    for n in range(queries):
        query = f"{words[n % len(words)]} {words[(n * 7) % len(words)]} in area {n % 31}"
        began = time.perf_counter()
        store.refresh(provisional=True)
        store.rank(query, limit=10)
        ranks.append(time.perf_counter() - began)
    root = roots.project
    folders = [r for r in (roots.project, roots.user) if r is not None]
    write_times = []
    for n in range(writes):
        text = (f"---\nname: Bench write {n}\ndescription: a memory written by the benchmark\n"
                f"type: project\n---\n\nWritten as Extract writes, number {n}.\n")
        began = time.perf_counter()
        with hold_roots(folders):
            (root / "project" / f"bench-write-{os.getpid()}-{n}.md").write_text(text)
            store.rebuild_index_files()
            store.save()
        write_times.append(time.perf_counter() - began)
    store.close()
    print(json.dumps({"first": first, "first_cpu": first_cpu, "ranks": ranks,
                      "writes": write_times}))
"""


def _body(chance: random.Random, vocabulary: list[str]) -> str:
    size = chance.randint(300, 900)
    words: list[str] = []
    length = 0
    while length < size:
        word = chance.choice(vocabulary)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def _vocabulary(chance: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {
        "".join(chance.choice(letters) for _ in range(chance.randint(3, 10))) for _ in range(5000)
    }
    return [*QUERY_WORDS, *sorted(words)]


def fill(project: Path, count: int, env: dict[str, str]) -> None:
    """``count`` memories in the project's and the user's memory folders, as cairn keeps them."""
    from cairn.memory.paths import memory_roots

    roots = memory_roots(project, environ=env)
    assert roots.project is not None
    chance = random.Random(count)
    vocabulary = _vocabulary(chance)
    old = time.time() - 3 * 365 * 86_400
    for root in (roots.project, roots.user):
        for kind in TYPES:
            (root / kind).mkdir(parents=True, exist_ok=True)
    for n in range(count):
        root = roots.user if n % 4 == 3 else roots.project
        kind = TYPES[n % 4]
        title = f"{chance.choice(vocabulary).title()} {chance.choice(vocabulary)} note {n}"
        text = (
            f"---\nname: {title}\ndescription: {_body(chance, vocabulary)[:120]}\n"
            f"type: {kind}\n---\n\n{_body(chance, vocabulary)}\n"
        )
        path = root / kind / f"note-{n:06d}.md"
        path.write_text(text)
        stamp = old + n * 900
        os.utime(path, (stamp, stamp))


def _child(mode: str, project: Path, env: dict[str, str], *extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(project), *extra],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _list(project: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds to the first line, seconds to the end, lines) of ``cairn memory list``."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "memory", "list"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert child.stdout is not None
    first = child.stdout.readline()
    first_at = time.perf_counter() - started
    lines = 1 if first else 0
    for _ in child.stdout:
        lines += 1
    child.wait(3600)
    return first_at, time.perf_counter() - started, lines


def _command(project: Path, env: dict[str, str], *args: str) -> float:
    """Seconds of one ``cairn memory`` command (a new process, output to a pipe)."""
    return _timed(project, env, *args)[0]


def _timed(project: Path, env: dict[str, str], *args: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``cairn memory`` command (a new process, output to a pipe)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "cairn.cli.main", "memory", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=3600)  # fmt: skip
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"cairn memory {' '.join(args)}: {done.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return elapsed, cpu


def _title(project: Path, env: dict[str, str], relative: str) -> str:
    from cairn.memory.paths import memory_roots

    root = memory_roots(project, environ=env).project
    assert root is not None
    text = (root / relative).read_text()
    return text.split("\nname: ", 1)[1].split("\n", 1)[0]


def cli_rows(
    project: Path, env: dict[str, str], count: int, runs: int, baseline: Path | None = None
) -> dict[str, str]:
    """``cairn memory`` show (by path and by title), search and forget (the substring match:
    no model endpoint; each forget undone by ``cairn memory restore``, not timed), each a whole
    command in a new process: medians of ``runs``, wall and CPU. With ``baseline`` (another
    tree's ``src``), each command also runs on that tree right after this one's (its rows
    end in ", baseline"); both share the saved index."""
    quiet = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}  # forget: no model
    trees = {"": quiet}
    if baseline is not None:
        trees[", baseline"] = {**quiet, "PYTHONPATH": str(baseline)}
    path = f"{TYPES[(count // 2) % 4]}/note-{count // 2:06d}.md"
    wanted = f"{TYPES[(count // 3) % 4]}/note-{count // 3:06d}.md"
    title = _title(project, env, wanted)
    commands = {
        "`cairn memory show <path>`": ("show", path),
        "`cairn memory show <title>`": ("show", title),
        "`cairn memory search <words>`": ("search", "deploy billing"),
        "`cairn memory forget <title> --yes`": ("forget", title, "--yes"),
        "(`cairn memory path`: the command's start-up alone)": ("path",),
    }
    timed: dict[str, list[tuple[float, float]]] = {
        label + tree: [] for label in commands for tree in trees
    }
    # as an installed cairn runs: bytecode compiled (PYTHONDONTWRITEBYTECODE would leave none)
    for source in (ROOT / "src", *([baseline] if baseline is not None else [])):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(source)], check=True)
    for _ in range(runs):
        for label, args in commands.items():
            for tree, tree_env in trees.items():  # interleaved: this tree, then the baseline
                timed[label + tree].append(_timed(project, tree_env, *args))
                if args[0] == "forget":
                    _timed(project, tree_env, "restore")
    return {
        label: f"{_s(statistics.median(w for w, _ in times))} wall, "
        f"{_s(statistics.median(c for _, c in times))} CPU"
        for label, times in timed.items()
    }


def _disk(home: Path) -> int:
    return sum(
        path.stat().st_size
        for path in home.rglob("*")
        if path.is_file() and "recall-index" in path.parts
    )


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.1 else f"{seconds * 1000:,.2f} ms"


def _s(seconds: float) -> str:
    return f"{seconds:,.2f} s" if seconds < 100 else f"{seconds:,.0f} s"


def corpus(count: int, base: Path) -> tuple[Path, Path, dict[str, str]]:
    """The generated memories of ``count`` under ``base`` (home, project, environment): made
    once, reused when ``base`` is a ``--work`` folder that holds them already."""
    home, project = base / f"home-{count}", base / f"project-{count}"
    env = {**os.environ, "CAIRN_HOME": str(home), "HOME": str(base)}
    filled = base / f"filled-{count}"
    if not filled.exists():
        (project / ".git").mkdir(parents=True, exist_ok=True)
        fill(project, count, env)
        filled.touch()
    return home, project, env


def _drop_indexes(home: Path) -> None:
    """Remove the saved indexes (a reused corpus's first scan is a first scan again)."""
    for folder in [path for path in home.rglob("recall-index") if path.is_dir()]:
        shutil.rmtree(folder)


def _drop_bench_writes(project: Path, env: dict[str, str]) -> None:
    """Remove the memories the warm child wrote and save the index without them, so a reused
    corpus holds ``count`` memories and an index that matches them."""
    from cairn.memory.paths import memory_roots

    root = memory_roots(project, environ=env).project
    assert root is not None
    for path in (root / "project").glob("bench-write-*.md"):
        path.unlink()
    _command(project, env, "reindex")


def saved(home: Path) -> bool:
    return any(path.is_dir() for path in home.rglob("recall-index"))


def files_column(
    count: int,
    base: Path,
    queries: int,
    writes: int,
    cli_runs: int,
    cli_only: bool = False,
    baseline: Path | None = None,
) -> dict[str, str]:
    home, project, env = corpus(count, base)
    if cli_only:  # the commands alone, on a saved index (made now if there is none)
        if not saved(home):
            _child("scan", project, env)
        return cli_rows(project, env, count, cli_runs, baseline)
    _drop_indexes(home)
    scan = _child("scan", project, env)
    assert scan["docs"] == count, scan
    warm = _child("warm", project, env, str(queries), str(writes), json.dumps(QUERY_WORDS))
    first_line, listed, lines = _list(project, env)
    _drop_bench_writes(project, env)
    return {
        "first scan, no index": f"{_s(scan['wall'])} wall, {_s(scan['cpu'])} CPU, "
        f"{scan['rss']:,.0f} MB RSS",
        "start with a saved index (first fast result)": f"{_ms(warm['first'])} wall, "
        f"{_ms(warm['first_cpu'])} CPU",
        "warm fast-phase rank, median": _ms(statistics.median(warm["ranks"])),
        "warm fast-phase rank, p95": _ms(_percentile(warm["ranks"], 0.95)),
        "one Extract write, median": _ms(statistics.median(warm["writes"])),
        "one Extract write, p95": _ms(_percentile(warm["writes"], 0.95)),
        "`cairn memory list`, first line": _s(first_line),
        "`cairn memory list`, all": f"{_s(listed)} ({lines:,} lines)",
        **cli_rows(project, env, count, cli_runs),
        "index on disk": f"{_disk(home) / 1e6:,.1f} MB",
    }


# The targets for the files backend at 100,000 memories: (row, target, how to read the
# measured cell: a number in the unit of the target).
TARGETS = (
    ("first scan, no index", "<= 15 s", lambda cell: _number(cell, " s wall")),
    ("first scan, no index", "<= 300 MB peak RSS",
     lambda cell: _number(cell.split(" CPU, ")[1], " MB")),
    ("start with a saved index (first fast result)", "<= 300 ms",
     lambda cell: _number(cell, " ms wall")),
    ("warm fast-phase rank, p95", "<= 5 ms", lambda cell: _number(cell, " ms")),
    ("one Extract write, median", "<= 150 ms", lambda cell: _number(cell, " ms")),
    ("`cairn memory list`, first line", "<= 0.5 s", lambda cell: _number(cell, " s")),
    ("`cairn memory show <title>`", "< 1 s", lambda cell: _number(cell, " s wall")),
    ("`cairn memory search <words>`", "< 1 s", lambda cell: _number(cell, " s wall")),
    ("`cairn memory forget <title> --yes`", "< 1 s", lambda cell: _number(cell, " s wall")),
)  # fmt: skip


def _number(cell: str, unit: str) -> float:
    """The number before ``unit`` in a table cell (``1,070 ms wall`` -> 1070.0)."""
    return float(cell.split(unit)[0].replace(",", ""))


def target_rows(column: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(figure, target, measured, met) for the 100,000 column (wall figures: on an idle machine)."""
    rows = []
    for label, target, read in TARGETS:
        if label not in column:
            continue
        bound = float(target.split()[1])
        value = read(column[label])
        met = value <= bound if target.startswith("<=") else value < bound
        rows.append((label, target, column[label], "yes" if met else "no"))
    return rows


def fresh_rows(
    project: Path, backends: dict[str, Any], base: Path, runs: int
) -> list[tuple[str, str, str]]:
    """A fresh machine's first turn (postgres, an empty mirror each run) against a process
    whose files are indexed already (files), with the prompt at the session's start (as
    ``cairn -p``) and after 2 s of typing; then a restart of the last fresh machine."""
    import memory_postgres_bench as shared

    rows: list[tuple[str, str, str]] = []
    for typing in (0.0, 2.0):
        turns: dict[str, list[dict[str, Any]]] = {"files": [], "postgres": []}
        for run in range(runs):
            turns["files"].append(
                shared._fresh_turn(project, backends["files"], base / "pg-files-home", typing)
            )
            turns["postgres"].append(shared._fresh_turn(
                project, backends["postgres"], base / f"pg-fresh-{typing:.0f}-{run}", typing
            ))  # fmt: skip
        when = "at the session's start" if not typing else f"{typing:.0f} s after it"
        rows += [
            (f"first turn, prompt {when}: first request after the prompt, median",
             *(_ms(statistics.median(t["first_request"] for t in turns[b])) for b in turns)),
            (f"first turn, prompt {when}: Recall's fast delivery after the prompt, median",
             *(_fast(turns[b]) for b in turns)),
            (f"first turn, prompt {when}: the first request carried a memory",
             *(f"{sum(t['carried'] for t in turns[b])} of {runs}" for b in turns)),
        ]  # fmt: skip
        if typing:
            warm = [t["warm_up"] for t in turns["postgres"]]
            rows.append(("full local warm-up in the background (from the session's start), "
                         "median", "–", _s(statistics.median(warm))))  # fmt: skip
    last = base / f"pg-fresh-2-{runs - 1}"
    restart = [shared._fresh_turn(project, backends["postgres"], last) for _ in range(runs)]
    rows.append(("a restart of that machine (mirror and index kept): first request, median",
                 "–", _ms(statistics.median(t["first_request"] for t in restart))))  # fmt: skip
    return rows


def _fast(turns: list[dict[str, Any]]) -> str:
    delivered = [t["fast_ms"] for t in turns if t["fast_ms"] is not None]
    return _ms(statistics.median(delivered) / 1000) if delivered else "none"


def postgres_rows(
    count: int, base: Path, writes: int, probes: int, fresh_runs: int = 3
) -> list[tuple[str, str, str]]:
    sys.path.insert(0, str(HERE))
    import memory_postgres_bench as shared

    from cairn.testing.postgres import PostgresServer

    with PostgresServer() as server:
        server.create_role("cairn_app")
        dsn = server.create_database("memory", owner="cairn_app")
        project = base / "pg-project"
        (project / ".git").mkdir(parents=True)
        backends = {
            "files": shared._settings("files"),
            "postgres": shared._settings("postgres", dsn),
        }
        shared._seed(shared._manager(project, backends["files"], base / "pg-files-home"), count)
        shared._seed(shared._manager(project, backends["postgres"], base / "pg-seeder"), count)
        files_first = shared._first_result(project, backends["files"], base / "pg-files-home")
        fresh = shared._first_result(project, backends["postgres"], base / "pg-fresh")
        turns = fresh_rows(project, backends, base, fresh_runs) if fresh_runs else []
        if writes == 0:  # the fresh machine's figures alone
            return [("first local search, new process (postgres: fresh machine, the whole pull "
                     "and index)", _ms(files_first), _ms(fresh)), *turns]  # fmt: skip
        managers = {
            "files": shared._manager(project, backends["files"], base / "pg-files-home"),
            "postgres": shared._manager(project, backends["postgres"], base / "pg-writer"),
        }
        for manager in managers.values():
            manager.search("warm up")
            shared._writes(manager, 1, "warm")  # a process's first write walks the mirror once
        timed = {name: shared._writes(m, writes, name) for name, m in managers.items()}
        seen = {
            "files": shared._visibility(project, backends["files"], base / "pg-files-home",
                                        probes, shared._section_writer(managers["files"])),
            "postgres": shared._visibility(project, backends["postgres"], base / "pg-reader",
                                           probes, shared._section_writer(managers["postgres"])),
        }  # fmt: skip
        for manager in managers.values():
            manager.close()
    return [
        ("one Extract write, median", _ms(statistics.median(timed["files"])),
         _ms(statistics.median(timed["postgres"]))),
        ("one Extract write, p95", _ms(_percentile(timed["files"], 0.95)),
         _ms(_percentile(timed["postgres"], 0.95))),
        ("visible in another process, median", _ms(statistics.median(seen["files"])),
         _ms(statistics.median(seen["postgres"]))),
        ("visible in another process, max", _ms(max(seen["files"])), _ms(max(seen["postgres"]))),
        ("first local search, new process (postgres: fresh machine, the whole pull and index)",
         _ms(files_first), _ms(fresh)),
        *turns,
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--postgres", type=int, default=10_000, help="memories; 0 skips")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--fresh-runs", type=int, default=3, help="fresh-machine first turns")
    parser.add_argument(
        "--cli-runs", type=int, default=3, help="runs of each `cairn memory` command (medians)"
    )
    parser.add_argument(
        "--cli-only",
        action="store_true",
        help="the `cairn memory` commands alone (on a saved index)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="with --cli-only: another tree's src (e.g. /tmp/base-ef12/src), each command run "
        "on it right after this tree's",
    )
    parser.add_argument(
        "--work",
        type=Path,
        help="keep the generated memories in this folder "
        "and reuse them (100,000 take minutes to write)",
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        if args.work is None:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        else:
            base = args.work.resolve()
            base.mkdir(parents=True, exist_ok=True)
        columns = {
            count: files_column(count, base, args.queries, args.writes, args.cli_runs,
                                args.cli_only, args.baseline)
            for count in sizes
        }  # fmt: skip
        pg = (
            postgres_rows(
                args.postgres,
                Path(stack.enter_context(tempfile.TemporaryDirectory())),
                args.writes,
                args.probes,
                args.fresh_runs,
            )
            if args.postgres and not args.cli_only
            else []
        )
    print(f"{started}, load {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
    if sizes:
        print("| files | " + " | ".join(f"{count:,}" for count in sizes) + " |")
        print("|---|" + "---|" * len(sizes))
        for label in columns[sizes[0]]:
            print(f"| {label} | " + " | ".join(columns[count][label] for count in sizes) + " |")
    if 100_000 in columns:
        print("\n| against the issue's targets (100,000, files) | target | measured | met |")
        print("|---|---|---|---|")
        for row in target_rows(columns[100_000]):
            print("| " + " | ".join(row) + " |")
    if pg:
        print(f"\n| {args.postgres:,} memories | files | postgres |")
        print("|---|---|---|")
        for label, files, postgres in pg:
            print(f"| {label} | {files} | {postgres} |")


if __name__ == "__main__":
    main()
