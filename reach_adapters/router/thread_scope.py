"""Threads belong to their principal, as task ids do.

A call's ``configurable["thread_id"]`` names a conversation an agent keeps across calls (a
LangGraph thread, an A2A context, a checkpointed history). The id is the caller's choice: left as
it is, a principal naming another's thread would read its history and could answer its pending
interrupt. So once the guard has settled who calls, the router gives every call made for a
principal the thread ``<principal>/<thread id>`` (`scope_thread`), before the idempotency check,
any agent or any hop onward sees it: the one place every surface passes (HTTP API, MCP, A2A,
async tasks, Python callers naming ``principal=``).

The same is done for ``session_id``, the key LangChain's chat histories (a
`RunnableWithMessageHistory`) are kept per by default: scoped here, it stays the caller's on hops
to other reach routers too, which scope it again for the router that called them. Adapters scope
the other ids their agents keep conversations on (a history kept per ``user_id``) with
`scoped_id`, where the agent runs, as only they know which those are.

What is shown to a caller (an error naming the thread) names the caller's own id (`own_thread`).
"""

from __future__ import annotations

from middleware import MetaInfo
from middleware.fast import amend

__all__ = ["SESSION_KEY", "THREAD_KEY", "id_text", "own_thread", "scope_thread", "scoped_id", "thread_prefix"]

THREAD_KEY = "thread_id"
SESSION_KEY = "session_id"


def thread_prefix(principal: str) -> str:
    """How `principal`'s threads start. A ``/`` or ``%`` in its name is written ``%2F`` or
    ``%25``, so the first ``/`` of a scoped thread ends the principal and no two principals'
    threads meet (``a`` naming ``b/c``, ``a/b`` naming ``c``)."""
    if "/" in principal or "%" in principal:
        principal = principal.replace("%", "%25").replace("/", "%2F")
    return principal + "/"


def scoped_id(value: str, principal: str) -> str:
    """`value` as `principal`'s own id, ``<principal>/<value>``; one already in that form stays
    as it is (only the principal's own calls can name it so)."""
    prefix = thread_prefix(principal)
    return value if value.startswith(prefix) else prefix + value


def scope_thread(meta: MetaInfo) -> None:
    """Make the thread and the session `meta` names its principal's; nothing without a principal.

    An id already scoped for this principal stays as it is, so a message dispatched again (an
    async task's retry, a task handed to another node) is not scoped twice; only the principal's
    own ids can start with its prefix, so this lets no one into another principal's thread. An id
    that is no string or integer is left for the agent to refuse.
    """
    configurable = meta.configurable
    principal = meta.principal
    if not configurable or principal is None:
        return
    scoped: dict[str, str] = {}
    for key in _SCOPED_KEYS:
        text = id_text(configurable.get(key))
        if not text:
            continue  # names none (the agent says whether it needs one), or one it cannot take
        own = scoped_id(text, principal)
        if own != text:
            scoped[key] = own
    if scoped:
        amend(meta, {"configurable": {**configurable, **scoped}})


_SCOPED_KEYS = (THREAD_KEY, SESSION_KEY)


def id_text(value: object) -> str | None:
    """`value` as an id's text: a string, or an integer written out; else None (a bool, another
    type, or an int of more digits than Python writes out)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    try:
        return str(value)
    except ValueError:
        return None


def own_thread(thread: str | None, principal: str | None) -> str | None:
    """`thread` as the caller named it: without its principal's prefix, where it has one."""
    if thread is None or principal is None:
        return thread
    prefix = thread_prefix(principal)
    return thread[len(prefix) :] if thread.startswith(prefix) else thread
