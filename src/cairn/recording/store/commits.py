"""Group commit: the writes of every session a replica holds, one statement for all of them.

Each :class:`~cairn.recording.store.writer.SessionWriter` flushes its session's batch as one
fenced write. With many turns in flight those writes would each be a transaction (a pooled
connection, a round trip, a commit, a ``NOTIFY`` wake-up of every replica's listener).
:class:`GroupCommit` (one per tenant and process) sends whatever writes are waiting as one
statement (each write's common table expressions named apart), so one transaction and one
round trip: while a group is being written, the next writes gather for the one after it, so a
busy replica writes many sessions at once and an idle one writes at once.

Every write still fences its own session (a writer that lost its lease learns it from its own
row count in the statement's result), and a writer hears of its batch only once the group
committed. A group is all or nothing: a write the database refuses (bad data) fails the
statement, and the group's writes are then sent one by one, so only the refused one fails.

**A lost connection.** The pool hands out no connection that died while idle (a PostgreSQL
restart, ``pg_terminate_backend``, a proxy's idle timeout: :mod:`cairn.database.connection`).
One lost while the group is under way goes again once, on a fresh connection, when the group
cannot have been committed twice by that:

- lost before the group's statement was sent (naming the tenant failed): nothing of it ran;
- lost during the statement, when every write in it is idempotent (:attr:`Statement.idempotent`:
  a lease renewal, prompt states, metadata: absolute values, the same row count again). The
  statement may have committed just before the connection went (the answer lost on the way),
  so a write that is not idempotent is never sent again: records and events would collide with
  their own rows (a refusal, not a duplicate, but the turn would fail all the same), a message
  count would grow twice, and a lease given up would read as lost. Those fail as before.

Otherwise (a second loss, a database that does not answer) every write in the group fails with
:class:`~cairn.database.connection.DatabaseUnavailable`: the turns' 503, within the pool's
connect timeout.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, NamedTuple

from cairn.database.connection import DatabaseUnavailable, _first_line
from cairn.debug_log import get_logger

if TYPE_CHECKING:
    from cairn.database.connection import Database

__all__ = ["MAX_GROUP_STATEMENTS", "GroupCommit", "Statement"]

MAX_GROUP_STATEMENTS = 64  # sessions' writes in one statement at most (the rest wait for the next)
_log = get_logger("SESSION_STORE")


class Statement(NamedTuple):
    """One session's write as parts of a statement: ``ctes`` (common table expressions, their
    names prefixed ``{p}``) and ``result`` (an expression over them, the write's row count),
    with the values of their ``%s`` placeholders, in order. ``idempotent``: running it again
    after it committed changes nothing and gives the same result (it may go again after a
    connection lost mid-statement)."""

    ctes: str
    result: str
    values: list[Any]
    idempotent: bool = False


class _Unsent(Exception):
    """The connection was lost before the group's statement was sent (``error``: why)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


_Waiting = tuple[Statement, "asyncio.Future[int]"]


class GroupCommit:
    """The writes of one tenant's writers, a group per statement (see the module docstring)."""

    def __init__(self, database: Database, tenant: str) -> None:
        self.database = database
        self.tenant = tenant
        self.transactions = 0  # groups committed (tests and the benchmark read it)
        self.resent = 0  # groups sent again after a lost connection (tests read it)
        self._waiting: list[_Waiting] = []
        self._running: asyncio.Task[None] | None = None

    async def write(self, statement: Statement) -> int:
        """Run ``statement`` in the next group; its row count once that group committed.
        :class:`DatabaseUnavailable` when it could not be written."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        self._waiting.append((statement, done))
        if self._running is None or self._running.done():
            self._running = loop.create_task(self._run())
        return await done

    async def _run(self) -> None:
        while self._waiting:
            group = self._waiting[:MAX_GROUP_STATEMENTS]
            del self._waiting[:MAX_GROUP_STATEMENTS]
            try:
                await self._commit(group)
            except BaseException as error:  # cancelled (shutdown): nobody waits forever
                _settle(group, DatabaseUnavailable(f"the write was cancelled: {error!r}"))
                _settle(self._waiting, DatabaseUnavailable("the write was cancelled"))
                self._waiting = []
                raise

    async def _commit(self, group: list[_Waiting]) -> None:
        try:
            counts = await self._send_again_if_lost([statement for statement, _ in group])
        except self.database.errors as error:
            if len(group) > 1 and not _lost(error):  # refused: find which one, write the rest
                _log.warning(f"a group of {len(group)} writes was refused ({error}); one by one")
                for waiting in group:
                    await self._commit([waiting])
                return
            lost = _lost(error)
            reason = "the database is unavailable" if lost else "the database refused the write"
            _settle(group, DatabaseUnavailable(f"{reason}: {_first_line(error)}"))
            return
        except DatabaseUnavailable as error:
            _settle(group, error)
            return
        for (_, done), count in zip(group, counts, strict=True):
            if not done.done():
                done.set_result(count)

    async def _send_again_if_lost(self, statements: list[Statement]) -> list[int]:
        """:meth:`_send`, once more on a fresh connection when the connection was lost and the
        group cannot be committed twice by it (see the module docstring)."""
        try:
            return await self._send(statements)
        except _Unsent as unsent:
            lost = unsent.error
        except self.database.errors as error:
            if not (_lost(error) and all(statement.idempotent for statement in statements)):
                raise
            lost = error
        _log.warning(f"connection lost under a group of {len(statements)} writes ({lost}); again")
        self.resent += 1
        try:
            return await self._send(statements)
        except _Unsent as unsent:
            raise unsent.error from None

    async def _send(self, statements: list[Statement]) -> list[int]:
        """The statements as one (one transaction, one round trip): each one's expressions
        named apart (``{p}`` → ``w3_``), its results one row."""
        if len(statements) == 1:  # the same text every time: the driver prepares it
            ctes, results, values = (
                statements[0].ctes.replace("{p}", ""),
                [statements[0].result.replace("{p}", "")],
                statements[0].values,
            )
        else:
            parts, results, values = [], [], []
            for number, statement in enumerate(statements):
                prefix = f"w{number}_"
                parts.append(statement.ctes.replace("{p}", prefix))
                results.append(statement.result.replace("{p}", prefix))
                values += statement.values
            ctes = ", ".join(parts)
        query = f"WITH {ctes} SELECT {', '.join(results)}"
        database = self.database
        async with database.connection() as connection:
            try:
                named = await database.name_tenant(connection, self.tenant)
            except database.errors as error:
                raise (_Unsent(error) if _lost(error) else error) from None
            if named:  # in autocommit: committed at once
                database.named(connection, self.tenant)
            cursor = await connection.execute(query, values)
            row = await cursor.fetchone()
        database.round_trips += 1
        self.transactions += 1
        assert row is not None  # a SELECT of expressions has one row
        return [int(count) for count in row]


def _lost(error: Exception) -> bool:
    """The connection or the server went away (every statement fails alike), as opposed to one
    statement refused."""
    import psycopg

    return isinstance(error, psycopg.OperationalError)


def _settle(group: list[_Waiting], error: Exception) -> None:
    for _, done in group:
        if not done.done():
            done.set_exception(error)
