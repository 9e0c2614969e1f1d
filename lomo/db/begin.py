"""On Postgres a transaction begins with its first write, and its BEGIN costs no round trip.

psycopg (not in autocommit) starts a transaction before a session's first statement with
a BEGIN it waits for, even in a pipeline: a round trip of its own, and a COMMIT after
it, for every session, even one that only reads. An agent step's path opens five sessions
(the message, two in the model step, two in the tool call): ten of its seventeen round
trips were BEGINs and COMMITs (issue 14; nine trips in all now). Here the driver runs in
autocommit and the transaction is opened by hand, late:

- a read runs outside the transaction until the session's first write. Under READ
  COMMITTED (the only level this code uses) every statement takes its own snapshot either
  way, and there is nothing of the session's own to see before it wrote: the same rows.
  SQLite's driver does the same (it begins before the first INSERT/UPDATE/DELETE);
- a statement that needs the transaction (a write, a locking read, a savepoint, anything
  not plainly a read) opens it first: `execute_all` puts the BEGIN in the same pipeline
  (no round trip of its own); a statement SQLAlchemy runs (the ORM) sends it just before;
- a session that only read commits nothing (the driver's commit of an idle connection
  sends nothing), and `execute_all(..., commit=True)` sends the COMMIT with the last
  statements: any write after that in the same session is refused (`CommittedEarly`), as
  it would land in a transaction of its own.
"""

from __future__ import annotations

import re
from typing import Any

from psycopg.pq import TransactionStatus
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.util import await_only

# Where a session's transaction is marked as committed by `execute_all(commit=True)`.
COMMITTED_EARLY = "lomo.committed_early"
_LOCKING = re.compile(r"\bFOR\s+(UPDATE|NO\s+KEY\s+UPDATE|SHARE|KEY\s+SHARE)\b", re.IGNORECASE)
# Functions that act on the transaction although called from a SELECT.
_TRANSACTIONAL_CALLS = re.compile(r"pg_advisory_xact|set_config|nextval|setval", re.IGNORECASE)
_READS = ("SELECT", "SHOW", "EXPLAIN", "VALUES")


class CommittedEarly(InvalidRequestError):
    """A write after the session's transaction was committed with its last statements."""


def needs_transaction(sql: str) -> bool:
    """Whether a statement must run inside the session's transaction. Anything not plainly a
    read does: a write (a `WITH` too, it may hide one), a lock, a savepoint."""
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    if head not in _READS:
        return True
    return bool(_LOCKING.search(sql) or _TRANSACTIONAL_CALLS.search(sql))


def idle(driver: Any) -> bool:
    """No transaction is open on this psycopg connection."""
    return bool(driver.info.transaction_status == TransactionStatus.IDLE)


def check_open(info: dict[str, Any]) -> None:
    if info.get(COMMITTED_EARLY):
        raise CommittedEarly(
            "this session's transaction was committed with its last statements; "
            "a later write would not be part of it"
        )


def _forget(conn: Any, *_: Any) -> None:
    if not conn.invalidated:  # an invalidated connection's info went with it
        conn.info.pop(COMMITTED_EARLY, None)


def _before_execute(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
    if not needs_transaction(statement):
        return
    check_open(conn.info)
    driver = conn.connection.driver_connection
    if idle(driver):
        await_only(driver.execute("BEGIN"))


def install(engine: Engine) -> None:
    """For an engine whose psycopg connections are opened in autocommit."""
    event.listen(engine, "before_cursor_execute", _before_execute)
    # A new transaction of the session (and its end) forgets an early commit.
    for name in ("begin", "commit", "rollback"):
        event.listen(engine, name, _forget)
