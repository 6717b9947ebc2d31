"""Opening a large memory: the first scan of a root, parallel and bounded in memory.

A root with no usable saved index (a new machine, a folder never indexed, a damaged index) has
every file read, parsed and tokenized once. Done file by file into the live index, that is one
posting insertion at a time and every parsed text held in memory (97 s and 825 MB at 100,000
memories). Here instead:

- worker processes (``python -m cairn.memory.store.bulk``, one per core: fresh interpreters,
  safe beside the threads a session runs, never re-running the caller's script) read, parse and
  weigh the files in chunks, and hand back each chunk's postings already grouped by term, while
  this process streams their results straight into a new snapshot:
  the texts go to the snapshot's texts file as they come, a chunk's posting list of a term is
  appended to that term's in one call (a file's slot is its place in the sorted list of files,
  known to the worker, so every list is born sorted; a skipped file leaves its slot free), and
  nothing else is kept;
- the snapshot is then swapped in and loaded like any saved index, its texts read from disk
  only when a memory is used.

With one core, or a pool that cannot start, the same stream runs in this process. A worker that
dies is replaced by the in-process path for the chunks it left. See :func:`build_snapshot`.

A build can be stopped (a process closing before it is done): its ``stop`` event is looked at
between chunks and while it waits for a worker's answer; it then kills its workers, removes what
it wrote and raises :class:`IndexingStopped`, so no index is ever installed half-built.
"""

from __future__ import annotations

import contextlib
import itertools
import marshal
import operator
import os
import select
import sys
import threading
import zlib
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryScope
from cairn.memory.store.cache import cache_header, install_snapshot, write_snapshot_files
from cairn.memory.store.journal import new_generation, sweep_temp_files
from cairn.memory.store.scan import stat_file, stat_key
from cairn.memory.store.scorer import ScorerConfig, term_weights

__all__ = [
    "BULK_MIN_FILES",
    "IndexingStopped",
    "Stop",
    "build_snapshot",
    "check_stop",
    "default_workers",
    "parse_files",
]

BULK_MIN_FILES = 2_000  # files to read before the first scan goes to worker processes
_CHUNK_FILES = 1_000  # files a worker reads per task, at most ...
_MIN_CHUNK_FILES = 16  # ... and at least (a small scan still gets a few chunks per worker)
_MAX_WORKERS = 4
_IN_FLIGHT_PER_WORKER = 2  # chunks queued per worker (bounds the results held at once)
_SKIP_SLOT = -1
_STOP_POLL_SECONDS = 0.02  # how often a wait for a worker's answer looks at its stop event
_log = get_logger("MEMORY")

# One parsed file: ("d", relative, stat key, type, title, description, body, mtime, size,
# symlink, slot) or ("s", relative, stat key, reason, detail, warning message).
Parsed = tuple[Any, ...]
# A chunk's postings, grouped by term in first-seen order: (terms joined by NUL, the number of
# postings of each as array("i") bytes, their slots as array("i") bytes, their weights).
Postings = tuple[str, bytes, bytes, bytes]
Chunk = tuple[list[Parsed], Postings]


class Stop(Protocol):
    """What stops an indexing under way (a ``threading.Event``, set by another thread)."""

    def is_set(self) -> bool: ...


class IndexingStopped(Exception):
    """An indexing was given up because its :class:`Stop` was set (the process is closing):
    nothing of it was saved."""


def check_stop(stop: Stop | None) -> None:
    """Raise :class:`IndexingStopped` when ``stop`` is set."""
    if stop is not None and stop.is_set():
        raise IndexingStopped("indexing stopped: the process is closing")


def default_workers() -> int:
    """Worker processes for a first scan: one per core, at most 4 (1: in this process)."""
    return max(1, min(os.cpu_count() or 1, _MAX_WORKERS))


def parse_files(
    root: str,
    scope: MemoryScope,
    relatives: Sequence[str],
    scorer: ScorerConfig,
    first_slot: int = 0,
) -> Chunk:
    """Read, parse and weigh ``relatives`` under ``root``, the i-th in slot ``first_slot + i``
    (a worker's task; any process): the files and their postings grouped by term."""
    from cairn.memory.store.parse import ParseSkip, parse_memory_file, plain_memory_fields

    found: list[Parsed] = []
    terms: list[str] = []  # every posting of the chunk, file by file: its term, slot, weight
    slots: list[int] = []
    weights = bytearray()
    base = Path(root)
    prefix = root.rstrip(os.sep) + os.sep
    for slot, relative in enumerate(relatives, first_slot):
        statted = stat_file(root, relative)
        if statted is None:
            continue  # gone since the walk: the next refresh notices
        info, symlink = statted
        key = stat_key(info)
        fields = None if symlink else plain_memory_fields(prefix + relative, info)
        if fields is None:  # anything unusual: the general reader decides and words it
            parsed = parse_memory_file(base / relative, base, scope, info=info)
            if isinstance(parsed, ParseSkip):
                found.append(("s", relative, key, parsed.reason, parsed.detail, parsed.message))
                continue
            fields = (parsed.type, parsed.title, parsed.description, parsed.body)
        kind, title, description, body = fields
        weighed = term_weights(title, description, body, scorer)
        terms.extend(weighed)
        weights.extend(weighed.values())
        slots.extend(itertools.repeat(slot, len(weighed)))
        found.append((
            "d", relative, key, kind, title, description, body, info.st_mtime, info.st_size,
            symlink, slot,
        ))  # fmt: skip
    return found, _grouped(terms, slots, weights)


def _grouped(terms: list[str], slots: list[int], weights: bytearray) -> Postings:
    """Postings (term, slot, weight) grouped by term, in C-level loops: each term gets the
    number of its first posting as its id, and a stable sort by id keeps every list in slot
    order."""
    first: dict[str, int] = {}
    ids = list(map(first.setdefault, terms, itertools.count()))
    order = sorted(range(len(ids)), key=ids.__getitem__)
    counts = array("i", Counter(ids).values())  # (in first-seen order, as ``first``)
    if len(order) > 1:
        pick = operator.itemgetter(*order)  # (a tuple from two items on)
        grouped_slots, grouped_weights = array("i", pick(slots)), bytes(pick(weights))
    else:
        grouped_slots, grouped_weights = array("i", slots), bytes(weights)
    return "\0".join(first), counts.tobytes(), grouped_slots.tobytes(), grouped_weights


def _chunks(relatives: Sequence[str], workers: int) -> list[Sequence[str]]:
    size = max(_MIN_CHUNK_FILES, min(_CHUNK_FILES, len(relatives) // (4 * workers) or 1))
    return [relatives[at : at + size] for at in range(0, len(relatives), size)]


def _parsed(
    root: str,
    scope: MemoryScope,
    relatives: Sequence[str],
    scorer: ScorerConfig,
    workers: int,
    stop: Stop | None = None,
) -> Iterator[Chunk]:
    """Every chunk of files parsed, in worker processes when it pays, else here; in order."""
    chunks = _chunks(relatives, workers)
    starts = list(itertools.accumulate((len(chunk) for chunk in chunks), initial=0))[:-1]
    done = 0
    if workers > 1 and len(chunks) > 1:
        _log.info(f"first scan of {root}: {len(relatives)} files in {workers} worker processes")
        try:
            pool = min(workers, len(chunks))
            for chunk in _in_workers(root, scope, chunks, starts, scorer, pool, stop):
                yield chunk
                done += 1
        except IndexingStopped:
            raise
        except Exception as error:  # workers that cannot start or died: the rest here
            _log.warning(f"memory scan workers failed ({error!r}); reading the rest here")
    for number in range(done, len(chunks)):
        check_stop(stop)
        yield parse_files(root, scope, chunks[number], scorer, starts[number])


def _in_workers(
    root: str,
    scope: MemoryScope,
    chunks: list[Sequence[str]],
    starts: list[int],
    scorer: ScorerConfig,
    workers: int,
    stop: Stop | None = None,
) -> Iterator[Chunk]:
    """Chunk k goes to worker k mod ``workers``; each answers its chunks in order, one frame
    each, so reading the workers in turn gives the chunks in order. A pipe's buffer bounds what
    a worker runs ahead of this process. ``stop`` set: the workers are killed (in ``finally``)
    and :class:`IndexingStopped` raised, also while waiting for a worker's answer."""
    import subprocess

    command = [sys.executable, "-m", "cairn.memory.store.bulk"]
    # Unbuffered answers (the stop is looked at while waiting: nothing may sit in a buffer)
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL,
             "bufsize": 0}  # fmt: skip
    processes = [subprocess.Popen(command, **pipes) for _ in range(workers)]  # type: ignore[call-overload]
    try:
        for number, process in enumerate(processes):
            mine = [(list(chunk), start) for chunk, start in
                    zip(chunks[number::workers], starts[number::workers], strict=True)]  # fmt: skip
            task = marshal.dumps((root, scope, dict(scorer.parameters()), mine))
            feeder = threading.Thread(target=_feed, args=(process, task), daemon=True)
            feeder.start()
        for number in range(len(chunks)):
            stdout = processes[number % workers].stdout
            assert stdout is not None
            yield _read_frame(stdout, stop)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()


def _feed(process: Any, task: bytes) -> None:
    with contextlib.suppress(OSError):
        left = memoryview(len(task).to_bytes(8, "big") + task)
        while left:  # (an unbuffered pipe may take part of a write)
            left = left[process.stdin.write(left) :]
        process.stdin.close()


def _read_frame(stream: IO[bytes], stop: Stop | None = None) -> Chunk:
    head = _read_exactly(stream, 8, stop)
    if len(head) != 8:
        raise RuntimeError("a worker ended early")
    data = _read_exactly(stream, int.from_bytes(head, "big"), stop)
    found = marshal.loads(data)  # noqa: S302 - our own worker's answer
    if not (isinstance(found, tuple) and len(found) == 2 and isinstance(found[0], list)):
        raise RuntimeError("a worker answered garbage")
    return found


def _read_exactly(stream: IO[bytes], size: int, stop: Stop | None) -> bytes:
    """``size`` bytes of an unbuffered pipe (fewer at its end), looking at ``stop`` whenever
    nothing has come yet."""
    data = bytearray()
    while len(data) < size:
        if stop is not None:
            check_stop(stop)
            while not select.select([stream], [], [], _STOP_POLL_SECONDS)[0]:
                check_stop(stop)
        piece = stream.read(size - len(data))
        if not piece:
            break
        data += piece
    return bytes(data)


def _worker() -> None:
    """A worker: read one task from stdin, answer each of its chunks on stdout."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    size = int.from_bytes(stdin.read(8), "big")
    root, scope, options, chunks = marshal.loads(stdin.read(size))  # noqa: S302 - from our parent
    scorer = ScorerConfig(**options)
    for chunk, start in chunks:
        answer = marshal.dumps(parse_files(root, scope, chunk, scorer, start))
        stdout.write(len(answer).to_bytes(8, "big") + answer)
        stdout.flush()


class _Builder:
    """Records and postings of a new snapshot, filled in slot order as chunks come."""

    def __init__(self) -> None:
        self.relatives: list[str] = []
        self.keys, self.slots = array("q"), array("i")
        self.mtimes, self.sizes = array("d"), array("q")
        self.symlinks = bytearray()
        self.kinds: list[str] = []
        self.ends, self.crcs = array("q"), array("I")
        self.total = 0
        self.postings: dict[str, tuple[array, bytearray]] = {}
        self.used = bytearray()  # 1 per slot holding a memory
        self.docs = 0
        self.skips = 0

    def add(self, chunk: Chunk, texts: IO[bytes]) -> None:
        parsed_files, (joined, count_bytes, slot_bytes, weights) = chunk
        for parsed in parsed_files:
            self._file(parsed, texts)
        counts = array("i")
        counts.frombytes(count_bytes)
        at = 0
        postings = self.postings
        for term, count in zip(joined.split("\0") if joined else (), counts, strict=True):
            end = at + count
            posting = postings.get(term)
            if posting is None:
                posting = postings[term] = (array("i"), bytearray())
            posting[0].frombytes(slot_bytes[4 * at : 4 * end])
            posting[1].extend(weights[at:end])
            at = end

    def _file(self, parsed: Parsed, texts: IO[bytes]) -> None:
        if parsed[0] == "d":
            (_, relative, key, kind, title, description, body, mtime, size, symlink,
             slot) = parsed  # fmt: skip
            self.docs += 1
            if len(self.used) <= slot:
                self.used.extend(bytes(slot + 1 - len(self.used)))
            self.used[slot] = 1
            parts = (title, description, body)
            self._row(relative, key, slot, mtime, size, symlink, kind, parts, texts)
        else:
            _, relative, key, reason, detail, message = parsed
            self.skips += 1
            _log.warning(message)
            self._row(relative, key, _SKIP_SLOT, 0.0, 0, False, reason, (detail, "", ""), texts)

    def _row(
        self,
        relative: str,
        key: Iterable[int],
        slot: int,
        mtime: float,
        size: int,
        symlink: bool,
        kind: str,
        parts: tuple[str, str, str],
        texts: IO[bytes],
    ) -> None:
        self.relatives.append(relative)
        self.keys.extend(key)
        self.slots.append(slot)
        self.mtimes.append(mtime)
        self.sizes.append(size)
        self.symlinks.append(1 if symlink else 0)
        self.kinds.append(kind)
        encoded = [part.encode("utf-8", "surrogatepass") for part in parts]
        for piece in encoded:
            self.total += len(piece)
            self.ends.append(self.total)
        raw = b"".join(encoded)
        self.crcs.append(zlib.crc32(raw))
        texts.write(raw)

    def record_state(self) -> tuple[Any, ...]:
        return ("\0".join(self.relatives), self.keys.tobytes(), self.slots.tobytes(),
                self.mtimes.tobytes(), self.sizes.tobytes(), bytes(self.symlinks),
                "\0".join(self.kinds), self.ends.tobytes(), self.crcs.tobytes(),
                self.total)  # fmt: skip

    def index_state(self) -> tuple[Any, ...]:
        terms = sorted(self.postings)
        ends, slots, weights = array("q"), array("i"), bytearray()
        for term in terms:
            posting_slots, posting_weights = self.postings.pop(term)
            slots.extend(posting_slots)
            weights.extend(posting_weights)
            ends.append(len(slots))
        return (self.docs, bytes(self.used), "\0".join(terms), ends.tobytes(),
                slots.tobytes(), bytes(weights))  # fmt: skip


def build_snapshot(
    path: Path,
    *,
    root: str,
    scope: MemoryScope,
    relatives: Sequence[str],
    scorer: ScorerConfig,
    workers: int,
    stop: Stop | None = None,
) -> bool:
    """Read every file of ``relatives`` under ``root`` into a new saved index at ``path``
    (installed, its journal empty); False when it could not be written.
    :class:`IndexingStopped` when ``stop`` was set before it was done (nothing installed,
    nothing left behind)."""
    builder = _Builder()

    def write_records(texts: IO[bytes]) -> tuple[Any, ...]:
        for chunk in _parsed(root, scope, relatives, scorer, workers, stop):
            builder.add(chunk, texts)
        check_stop(stop)  # (the last look: the snapshot is installed from here on)
        return builder.record_state()

    generation = new_generation()
    header = cache_header(root, scope, scorer.fingerprint())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep_temp_files(path.parent)
        temps = write_snapshot_files(path, header, generation, write_records,
                                     builder.index_state)  # fmt: skip
    except OSError as error:
        _log.debug(f"recall index {path} not built: {error}")
        return False
    return install_snapshot(path, generation, temps)


if __name__ == "__main__":
    _worker()
