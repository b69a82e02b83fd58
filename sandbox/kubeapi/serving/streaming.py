"""Watch streams: the initial events, then live events, bookmarks, timeouts and 410 errors.

Owns the HTTP side of a watch: a chunked ``application/json`` stream of one JSON event per
line, as the real apiserver writes it. An expired resourceVersion is answered with HTTP 200 and
a single ``ERROR`` event carrying a 410 Expired Status (what clients expect); an idle watch that
asked for ``allowWatchBookmarks`` gets a BOOKMARK every ``bookmark_interval``; the stream ends
after ``timeoutSeconds``, when the watcher falls too far behind, or when the server stops.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web

from sandbox.kubeapi import errors, options
from sandbox.kubeapi.serving import rendering
from sandbox.kubeapi.state import store, watching


def _timeout(query: Any, settings: options.Settings) -> float:
    raw = query.get("timeoutSeconds")
    if not raw:
        return settings.default_watch_timeout
    try:
        return max(float(raw), 0.0)
    except ValueError as exc:
        raise errors.bad_request(f"invalid timeoutSeconds {raw!r}") from exc


async def watch(
    request: web.Request,
    state: store.Store,
    view: rendering.View,
    filter_: watching.Filter,
    settings: options.Settings,
) -> web.StreamResponse:
    query = request.query
    deadline = time.monotonic() + _timeout(query, settings)
    bookmarks = options.flag(query.get("allowWatchBookmarks"))
    rv = query.get("resourceVersion")
    send_initial = options.flag(query.get("sendInitialEvents"))
    if send_initial:
        rv = None  # the initial state as synthetic ADDED events, then the bookmark below
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    try:
        initial, watcher = state.watch(filter_, rv)
    except errors.ApiError as exc:
        await response.prepare(request)
        await response.write(rendering.error_event_bytes(exc.status()))
        await response.write_eof()
        return response
    try:
        await response.prepare(request)
        chunk = b"".join(
            rendering.event_bytes(view, kind, e, headers=i == 0) for i, (kind, e) in enumerate(initial)
        )
        if send_initial and bookmarks:
            chunk += rendering.bookmark_bytes(view, state.rv, initial_events_end=True)
        if chunk:
            await response.write(chunk)
        await _pump(
            response,
            state,
            view,
            watcher,
            deadline=deadline,
            bookmarks=bookmarks,
            interval=settings.bookmark_interval,
            headers=not initial,
        )
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away (a cancellation, with handler_cancellation, propagates)
    finally:
        state.history.unsubscribe(watcher)
    return response


async def _pump(
    response: web.StreamResponse,
    state: store.Store,
    view: rendering.View,
    watcher: watching.Watcher,
    *,
    deadline: float,
    bookmarks: bool,
    interval: float,
    headers: bool,
) -> None:
    queue = watcher.queue
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        wait = min(remaining, interval) if bookmarks else remaining
        try:
            item = await asyncio.wait_for(queue.get(), timeout=wait)
        except TimeoutError:
            if bookmarks and deadline - time.monotonic() > 0:
                # The queue is empty, so every event up to the store's rv has been sent.
                await response.write(rendering.bookmark_bytes(view, state.rv))
            continue
        if item is None:
            return
        parts = [rendering.event_bytes(view, item[0], item[1], headers=headers)]
        headers = False
        while not queue.empty():  # batch what is already queued into one write
            more = queue.get_nowait()
            if more is None:
                await response.write(b"".join(parts))
                return
            parts.append(rendering.event_bytes(view, more[0], more[1]))
        await response.write(b"".join(parts))
