"""How a job command's process ends once its answer is out: without tearing down the
interpreter and the embedded engine (docs/decisions/0017-offline-command-budget.md).

A normal exit after an analysis spends 0.08-0.15 s freeing every module's objects and
running chDB's static destructors, which a process about to end does not need: every
store the command opened is already closed (`CommandStores.close`), every write it
made returned only once the store had it (as `serve`'s and `sink`'s forced exit rely
on, `holonograph.cli.stopping`). So when a command opened stores and closed them all,
and no other thread runs, `leave` flushes the standard streams, runs the `atexit`
handlers (logging's flush, finalizers of temporary files) and ends the process with
the same exit code by `os._exit`. In any other case, or when a stream cannot be
flushed (a closed pipe), it returns and the interpreter exits as before."""

from __future__ import annotations

import atexit
import os
import sys
import threading

_held = 0  # stores' owners (`CommandStores`) with an open store
_released = 0  # those that closed theirs


def hold() -> None:
    """A command's stores' owner opened its first store."""
    global _held
    _held += 1


def release() -> None:
    """That owner closed every store it opened."""
    global _held, _released
    _held -= 1
    _released += 1


def settled() -> bool:
    """Whether the command opened stores and has closed every one of them."""
    return _released > 0 and _held == 0


def leave(code: object) -> None:
    """End the process now with exit `code` (an int or None, as `sys.exit` takes) when
    the command is `settled`, no other thread runs and the streams flush; else return."""
    if not settled() or not (code is None or isinstance(code, int)):
        return
    if any(t is not threading.current_thread() and not t.daemon for t in threading.enumerate()):
        return  # the interpreter would wait for it
    if not _flushed():
        return
    atexit._run_exitfuncs()  # then cleared: the interpreter's exit would not run them twice
    if not _flushed():
        return
    os._exit(code or 0)


def _flushed() -> bool:
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: started without it
                stream.flush()
    except Exception:  # a closed pipe or stream: the interpreter's exit says so, as before
        return False
    return True
