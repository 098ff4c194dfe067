#!/usr/bin/env python3
"""Independent Slack Socket Mode + Web API server for the hermes-svc benchmarks.

Written only from docs/research/slack-socket-mode.md (which cites Slack's docs at docs.slack.dev, the
official SDKs and issue threads), never from the project's own mock or adapter, so that it does not agree
with our client by construction. The source of each behaviour, and what was chosen where the note says
UNCONFIRMED, are in README.md ("Slack Socket Mode + Web API").

One asyncio loop serves HTTP and every WebSocket. Each socket has one reader (the handler, which
always reads, so that faults can ignore what it reads) and one writer task draining an ordered outbox.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import itertools
import json
import secrets
import signal
import sys
import time
import uuid
from typing import Any

from aiohttp import WSMsgType, web

CONNECTION_TIME_S, DEBUG_CONNECTION_TIME_S = 18060, 360  # hello approximate_connection_time
BUILD_NUMBER = 10
HUMAN_USER = "U0INDEPUSR"
SOCKET_FAULTS = ("silence", "deaf", "close", "disconnect")
POST_FAULTS = ("429", "500", "reset_after")
STAT_KEYS = ("urls_issued", "open_refused", "connections", "tickets_refused", "envelopes_sent", "redeliveries",
             "acks", "acks_with_payload", "duplicate_acks", "late_acks", "stray_acks", "bad_frames", "given_up",
             "ws_pings", "pings_unanswered", "server_pings", "ws_pongs", "frames_ignored", "frames_withheld",
             "disconnects", "too_many_websockets", "client_closes", "events_emitted", "events_acked",
             "post_requests", "posts")


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def slack(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, dumps=dumps, headers=headers)


def ratelimited(retry_after: int) -> web.Response:
    return slack({"ok": False, "error": "ratelimited"}, 429, {"Retry-After": str(retry_after)})


class Event:
    """One Events API event: the envelope changes per delivery, `event_id` never does."""

    __slots__ = ("event_id", "inner", "event_time", "attempt", "reason", "envelope_id", "envelopes", "timer",
                 "state", "created_ms", "acked_ms")

    def __init__(self, event_id: str, inner: dict[str, Any], created_ms: int) -> None:
        self.event_id, self.inner, self.created_ms = event_id, inner, created_ms
        self.event_time, self.attempt, self.reason = int(time.time()), 0, ""
        self.envelope_id: str | None = None
        self.envelopes: list[str] = []
        self.timer: asyncio.TimerHandle | None = None
        self.state = "new"  # new | waiting (no socket) | sent | acked | given_up
        self.acked_ms: int | None = None

    def describe(self) -> dict[str, Any]:
        e = self.inner
        return {"event_id": self.event_id, "channel": e["channel"], "ts": e["ts"], "text": e["text"],
                "thread_ts": e.get("thread_ts"), "bot": "bot_id" in e, "state": self.state,
                "retry_attempt": self.attempt, "envelope_ids": self.envelopes, "created_ms": self.created_ms,
                "acked_ms": self.acked_ms}


class Conn:
    __slots__ = ("id", "ws", "transport", "outbox", "mode", "ready", "closing", "host", "pinger", "closer")

    def __init__(self, cid: int, ws: web.WebSocketResponse, transport: Any) -> None:
        self.id, self.ws, self.transport = cid, ws, transport
        self.outbox: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self.mode: str | None = None  # None | "silence" | "deaf"
        self.ready = self.closing = False
        self.host = f"applink-independent-{cid}"
        self.pinger: asyncio.Task[None] | None = None
        self.closer: asyncio.TimerHandle | None = None

    def put(self, item: tuple[Any, ...]) -> None:
        if not self.closing:
            self.outbox.put_nowait(item)

    def send(self, obj: dict[str, Any]) -> None:
        self.put(("text", dumps(obj)))

    def close(self, code: int = 1000, reason: str = "") -> None:
        if not self.closing:  # after everything already queued; goes out even when silenced
            self.outbox.put_nowait(("close", code, reason))
            self.closing = True

    def gone(self) -> bool:
        return self.ws.closed or self.transport is None or self.transport.is_closing()


class Slack:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.monotonic()
        self.stats: collections.Counter[str] = collections.Counter({k: 0 for k in STAT_KEYS})
        self.tickets: dict[str, bool] = {}  # ticket -> used
        self.conns: list[Conn] = []  # live, in connection order (round robin)
        self.rr = 0
        self.waiting: collections.deque[Event] = collections.deque()
        self.events: list[Event] = []
        self.envelopes: dict[str, Event] = {}  # every envelope_id ever sent -> its event
        self.posts: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.last_ts_us = self.port = 0
        self.conn_ids, self.event_numbers = itertools.count(1), itertools.count(1)
        self.url_app_id = hashlib.sha256(args.app_id.encode()).hexdigest()  # the URL's app_id is 64 hex
        self.clear()

    def clear(self) -> None:
        self.link_disabled = self.revoked = False
        self.refuse: dict[str, Any] | None = None
        self.post_fault: dict[str, Any] | None = None

    def ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def when(self) -> dict[str, int]:
        return {"received_ms": self.ms(), "received_unix_ms": int(time.time() * 1000)}

    def new_ts(self) -> str:
        us = max(int(time.time() * 1_000_000), self.last_ts_us + 1)  # unique, rising
        self.last_ts_us = us
        return f"{us // 1_000_000}.{us % 1_000_000:06d}"

    # ---------------------------------------------------------------- Web API
    def auth(self, req: web.Request, want: str) -> str | None:
        """An error code, or None when the bearer token is the `want` ("app"/"bot") token."""
        scheme, _, token = req.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return "not_authed"
        if token not in (self.args.app_token, self.args.bot_token):
            return "invalid_auth"
        if self.revoked:
            return "token_revoked"
        if token != (self.args.app_token if want == "app" else self.args.bot_token):
            return "not_allowed_token_type"
        return None

    def ws_base(self, req: web.Request) -> str:
        if self.args.public_ws:
            return self.args.public_ws.rstrip("/")
        if self.args.host in ("0.0.0.0", "::", ""):
            return f"ws://{req.host}"
        return f"ws://{self.args.host}:{self.port}"

    async def connections_open(self, req: web.Request) -> web.Response:
        await req.read()
        error = self.auth(req, "app")
        refuse = self.refuse if error is None else None
        if refuse is not None:
            if refuse["count"] is not None:
                refuse["count"] -= 1
                if refuse["count"] <= 0:
                    self.refuse = None
            if refuse["retry_after"] is not None:
                self.stats["open_refused"] += 1
                return ratelimited(refuse["retry_after"])
            error = refuse["error"]
        if error is not None:
            self.stats["open_refused"] += 1
            return slack({"ok": False, "error": error})
        ticket = str(uuid.uuid4())
        self.tickets[ticket] = False
        self.stats["urls_issued"] += 1
        url = f"{self.ws_base(req)}/link/?ticket={ticket}&app_id={self.url_app_id}"
        return slack({"ok": True, "url": url}, headers={"x-oauth-scopes": "connections:write"})

    async def auth_test(self, req: web.Request) -> web.Response:
        await req.read()
        error = self.auth(req, "bot")
        if error is not None:
            return slack({"ok": False, "error": error})
        a = self.args
        return slack({"ok": True, "url": "https://independent-bench.slack.com/", "team": "Independent Bench",
                      "user": "independent-bot", "team_id": a.team_id, "user_id": a.bot_user_id, "bot_id": a.bot_id,
                      "is_enterprise_install": False}, headers={"x-oauth-scopes": "chat:write"})

    @staticmethod
    async def params(req: web.Request) -> dict[str, Any] | None:
        params: dict[str, Any] = dict(req.query)
        if req.content_type == "application/json":
            try:
                body = await req.json()
            except ValueError:
                return None
            if not isinstance(body, dict):
                return None
            params.update(body)
        elif req.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            params.update({k: v for k, v in (await req.post()).items() if isinstance(v, str)})
        else:
            await req.read()
        return params

    def take_post_fault(self, kinds: tuple[str, ...]) -> dict[str, Any] | None:
        f = self.post_fault
        if f is None or f["kind"] not in kinds:
            return None
        f["count"] -= 1
        if f["count"] <= 0:
            self.post_fault = None
        return f

    async def post_message(self, req: web.Request) -> web.StreamResponse:
        self.stats["post_requests"] += 1
        attempt: dict[str, Any] = {"method": "chat.postMessage", **self.when()}
        self.attempts.append(attempt)

        def answer(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
            attempt.update(status=status, ok=body.get("ok"), error=body.get("error"))
            return slack(body, status, headers)

        params = await self.params(req)
        error = self.auth(req, "bot")
        if error is not None:
            return answer({"ok": False, "error": error})
        if params is None:
            return answer({"ok": False, "error": "invalid_json"})
        channel, text, thread_ts = str(params.get("channel") or ""), params.get("text"), params.get("thread_ts")
        text = "" if text is None else str(text)
        thread_ts = str(thread_ts) if thread_ts not in (None, "") else None
        attempt.update(channel=channel, text=text, thread_ts=thread_ts)
        fault = self.take_post_fault(("429",))
        if fault is not None:
            attempt.update(fault="429", status=429, ok=False, error="ratelimited")
            return ratelimited(fault["retry_after"])
        if channel not in self.args.channels:
            return answer({"ok": False, "error": "channel_not_found"})
        if not text.strip() and not params.get("blocks") and not params.get("attachments"):
            return answer({"ok": False, "error": "no_text"})
        fault = self.take_post_fault(("500", "reset_after"))
        if fault is not None:
            attempt["fault"] = fault["kind"]
            if fault["kind"] == "500" and not fault["commit"]:
                return answer({"ok": False, "error": "internal_error"})
        ts = self.new_ts()
        post = {"channel": channel, "text": text, "thread_ts": thread_ts, "ts": ts, **self.when()}
        self.posts.append(post)
        self.stats["posts"] += 1
        attempt["recorded_ts"] = ts
        self.emit(channel, text, thread_ts, user=self.args.bot_user_id, ts=ts, bot=True)  # the echo
        if fault is not None and fault["kind"] == "500":
            return answer({"ok": False, "error": "internal_error"})
        if fault is not None:  # reset_after: committed, then the connection drops without an answer
            attempt.update(status=None, ok=None, error="connection dropped")
            if req.transport is not None:
                req.transport.abort()
            raise asyncio.CancelledError  # aiohttp drops a cancelled handler's connection quietly
        message = {"type": "message", "text": text, "user": self.args.bot_user_id, "bot_id": self.args.bot_id,
                   "app_id": self.args.app_id, "team": self.args.team_id, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
        return answer({"ok": True, "channel": channel, "ts": ts, "message": message})

    async def unknown_method(self, req: web.Request) -> web.Response:
        await req.read()
        return slack({"ok": False, "error": "unknown_method", "req_method": req.match_info["method"]})

    # ---------------------------------------------------------------- events
    def emit(self, channel: str, text: str, thread_ts: str | None = None, user: str = HUMAN_USER,
             ts: str | None = None, bot: bool = False) -> Event:
        ts = ts or self.new_ts()
        inner: dict[str, Any] = {"type": "message", "channel": channel,
                                 "channel_type": "im" if channel.startswith("D") else "channel", "user": user,
                                 "text": text, "ts": ts, "event_ts": ts}
        if bot:
            inner.update(bot_id=self.args.bot_id, app_id=self.args.app_id, team=self.args.team_id)
        else:
            inner.update(client_msg_id=str(uuid.uuid4()), team=self.args.team_id)
        if thread_ts:
            inner["thread_ts"] = thread_ts
        event_id = f"Ev{next(self.event_numbers):05d}{secrets.token_hex(3).upper()}"
        ev = Event(event_id, inner, self.ms())
        self.events.append(ev)
        self.stats["events_emitted"] += 1
        self.deliver(ev)
        return ev

    def payload(self, ev: Event) -> dict[str, Any]:
        a = self.args
        return {"token": "independent-verification-token", "team_id": a.team_id, "context_team_id": a.team_id,
                "api_app_id": a.app_id, "event": ev.inner, "type": "event_callback", "event_id": ev.event_id,
                "event_time": ev.event_time,
                "authorizations": [{"enterprise_id": None, "team_id": a.team_id, "user_id": a.bot_user_id,
                                    "is_bot": True, "is_enterprise_install": False}],
                "is_ext_shared_channel": False, "event_context": f"4-independent-{ev.event_id}"}

    def deliver(self, ev: Event) -> None:
        """Hand the event to the next live socket (round robin), or park it until one connects."""
        live = [c for c in self.conns if c.ready and not c.closing]
        if not live:
            ev.state = "waiting"
            self.waiting.append(ev)
            return
        conn = live[self.rr % len(live)]
        self.rr += 1
        if ev.envelope_id is None or not self.args.same_envelope_id:
            ev.envelope_id = str(uuid.uuid4())
            ev.envelopes.append(ev.envelope_id)
            self.envelopes[ev.envelope_id] = ev
        ev.state = "sent"
        conn.send({"envelope_id": ev.envelope_id, "payload": self.payload(ev), "type": "events_api",
                   "accepts_response_payload": False, "retry_attempt": ev.attempt, "retry_reason": ev.reason})
        self.stats["envelopes_sent"] += 1
        loop = asyncio.get_running_loop()
        ev.timer = loop.call_later(self.args.ack_timeout_ms / 1000, self.expire, ev, ev.attempt)

    def expire(self, ev: Event, attempt: int) -> None:
        if ev.state != "sent" or ev.attempt != attempt:
            return
        if ev.attempt >= self.args.max_retries:
            ev.state = "given_up"
            self.stats["given_up"] += 1
        else:
            ev.attempt, ev.reason = ev.attempt + 1, "timeout"
            self.stats["redeliveries"] += 1
            self.deliver(ev)

    def flush_waiting(self) -> None:
        while self.waiting and any(c.ready and not c.closing for c in self.conns):
            ev = self.waiting.popleft()
            if ev.state == "waiting":
                self.deliver(ev)

    def on_ack(self, data: str) -> None:
        try:
            frame = json.loads(data)
        except ValueError:
            frame = None
        envelope_id = frame.get("envelope_id") if isinstance(frame, dict) else None
        if not isinstance(envelope_id, str):
            self.stats["bad_frames"] += 1
            return
        ev = self.envelopes.get(envelope_id)
        if ev is None:
            self.stats["stray_acks"] += 1
            return
        self.stats["acks"] += 1
        self.stats["acks_with_payload"] += "payload" in frame
        if ev.state == "acked":
            self.stats["duplicate_acks"] += 1
        elif ev.state == "given_up":
            self.stats["late_acks"] += 1
        else:
            ev.state, ev.acked_ms = "acked", self.ms()
            if ev.timer is not None:
                ev.timer.cancel()
            self.stats["events_acked"] += 1

    # ---------------------------------------------------------------- WebSocket
    async def link(self, req: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=False, autoclose=False, compress=False, timeout=5)
        if not ws.can_prepare(req).ok:
            return web.Response(status=400, text="expected a WebSocket upgrade\n")
        ticket = req.query.get("ticket", "")
        if self.tickets.get(ticket, True):  # unknown, or already used: refused at the handshake
            self.stats["tickets_refused"] += 1
            return web.Response(status=401, text="invalid or used ticket\n")
        self.tickets[ticket] = True
        await ws.prepare(req)
        conn = Conn(next(self.conn_ids), ws, req.transport)
        self.stats["connections"] += 1
        writer = asyncio.create_task(self.write_loop(conn))
        if self.link_disabled or len(self.conns) >= self.args.max_connections:
            reason = "link_disabled" if self.link_disabled else "too_many_websockets"
            self.stats["too_many_websockets"] += reason == "too_many_websockets"
            self.disconnect(conn, reason, 0)  # no hello
        else:
            self.conns.append(conn)
            debug = req.query.get("debug_reconnects", "").lower() == "true"
            conn.send({"type": "hello", "num_connections": len(self.conns),
                       "debug_info": {"host": conn.host, "build_number": BUILD_NUMBER,
                                      "approximate_connection_time": DEBUG_CONNECTION_TIME_S if debug
                                      else CONNECTION_TIME_S},
                       "connection_info": {"app_id": self.args.app_id}})
            conn.ready = True
            if self.args.server_ping_ms > 0:
                conn.pinger = asyncio.create_task(self.ping_loop(conn))
            self.flush_waiting()
        try:
            await self.read_loop(conn)
        finally:
            if conn in self.conns:
                self.conns.remove(conn)
            if conn.pinger is not None:
                conn.pinger.cancel()
            if conn.closer is not None:
                conn.closer.cancel()
            if conn.closing:
                await asyncio.wait([writer], timeout=3)
            writer.cancel()
        return ws

    async def read_loop(self, conn: Conn) -> None:
        """Always reads, so a socket under "silence"/"deaf" drops what arrives (no pong, no ack, no close reply)."""
        ws = conn.ws
        while True:
            msg = await ws.receive()
            if msg.type in (WSMsgType.CLOSED, WSMsgType.CLOSING, WSMsgType.ERROR):
                return
            if msg.type == WSMsgType.PING:
                self.stats["ws_pings"] += 1
                if conn.mode is not None or self.args.no_ws_pong:
                    self.stats["pings_unanswered"] += 1
                else:
                    conn.put(("pong", msg.data))
                continue
            if msg.type == WSMsgType.CLOSE:
                self.stats["client_closes"] += 1
                while conn.mode is not None and not conn.closing and not conn.gone():
                    await asyncio.sleep(0.1)  # half-open: the close is not answered
                conn.close(1000)
                return
            if conn.mode is not None:
                self.stats["frames_ignored"] += 1
            elif msg.type == WSMsgType.TEXT:
                self.on_ack(msg.data)
            elif msg.type == WSMsgType.PONG:
                self.stats["ws_pongs"] += 1
            else:
                self.stats["bad_frames"] += 1

    async def write_loop(self, conn: Conn) -> None:
        ws = conn.ws
        try:
            while True:
                item = await conn.outbox.get()
                if item[0] == "close":
                    await ws.close(code=item[1], message=item[2].encode())
                    return
                if conn.mode == "silence":
                    self.stats["frames_withheld"] += 1
                elif item[0] == "text":
                    await ws.send_str(item[1])
                elif item[0] == "ping":
                    await ws.ping(item[1])
                else:
                    await ws.pong(item[1])
        except (ConnectionError, RuntimeError):
            pass  # peer went away; the reader cleans up

    async def ping_loop(self, conn: Conn) -> None:
        while not conn.closing:
            await asyncio.sleep(self.args.server_ping_ms / 1000)
            if conn.mode != "silence" and not conn.closing:
                conn.put(("ping", b"independent"))
                self.stats["server_pings"] += 1

    def disconnect(self, conn: Conn, reason: str, close_after_ms: int | None) -> None:
        conn.send({"type": "disconnect", "reason": reason, "debug_info": {"host": f"wss-independent-{conn.id}"}})
        self.stats["disconnects"] += 1
        if close_after_ms is not None and close_after_ms <= 0:
            conn.close(1000)
        elif close_after_ms is not None:
            conn.closer = asyncio.get_running_loop().call_later(close_after_ms / 1000, conn.close, 1000)

    # ---------------------------------------------------------------- control
    async def control(self, req: web.Request) -> web.Response:
        handler = {"emit": self.c_emit, "fault": self.c_fault, "refuse_open": self.c_refuse_open,
                   "revoke": self.c_revoke, "post_fault": self.c_post_fault, "clear": self.c_clear}.get(
            req.match_info["name"])
        if handler is None:
            return slack({"ok": False, "error": "unknown control route"}, 404)
        try:
            body = await req.json() if req.can_read_body else {}
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return slack({"ok": False, "error": "the body is a JSON object"}, 400)
        try:
            return slack({"ok": True, **handler(body)})
        except ValueError as exc:
            return slack({"ok": False, "error": str(exc)}, 400)

    @staticmethod
    def int_field(body: dict[str, Any], name: str, default: int | None, lo: int, hi: int) -> int | None:
        v = body.get(name, default)
        if v is None and default is None:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise ValueError(f"{name} is an integer in {lo}..{hi}")
        return v

    def c_emit(self, body: dict[str, Any]) -> dict[str, Any]:
        count = self.int_field(body, "count", 1, 0, 100_000) or 0
        channel = str(body.get("channel") or self.args.channels[0])
        thread_ts, user = body.get("thread_ts"), str(body.get("user") or HUMAN_USER)
        out = []
        for _ in range(count):
            n = self.stats["events_emitted"] + 1
            ev = self.emit(channel, str(body.get("text") or f"independent message {n}"),
                           str(thread_ts) if thread_ts else None, user)
            out.append({"event_id": ev.event_id, "ts": ev.inner["ts"], "channel": channel})
        return {"event_ids": [e["event_id"] for e in out], "events": out}

    def c_fault(self, body: dict[str, Any]) -> dict[str, Any]:
        kind, reason = body.get("kind"), str(body.get("reason") or "refresh_requested")
        if kind not in SOCKET_FAULTS:
            raise ValueError(f"kind is one of {list(SOCKET_FAULTS)}")
        default_close = None if reason == "warning" else self.args.disconnect_grace_ms
        close_after = self.int_field(body, "close_after_ms", default_close, 0, 86_400_000)
        conns = list(self.conns)
        for conn in conns:
            if kind in ("silence", "deaf"):
                conn.mode = kind
            elif kind == "close":
                conn.close(1000)
            else:
                self.disconnect(conn, reason, close_after)
        if kind == "disconnect" and reason == "link_disabled":
            self.link_disabled = True
        return {"kind": kind, "sockets": len(conns)}

    def c_refuse_open(self, body: dict[str, Any]) -> dict[str, Any]:
        self.refuse = {"error": str(body.get("error") or "internal_error"),
                       "retry_after": self.int_field(body, "retry_after", None, 0, 86_400),
                       "count": self.int_field(body, "count", None, 1, 1 << 30)}
        return {"refuse_open": self.refuse}

    def c_revoke(self, _body: dict[str, Any]) -> dict[str, Any]:
        self.revoked = True
        return {"revoked": True}

    def c_post_fault(self, body: dict[str, Any]) -> dict[str, Any]:
        kind = str(body.get("kind"))
        if kind not in POST_FAULTS:
            raise ValueError(f"kind is one of {list(POST_FAULTS)}")
        self.post_fault = {"kind": kind, "count": self.int_field(body, "count", 1, 1, 1 << 30),
                           "retry_after": self.int_field(body, "retry_after", 1, 0, 86_400),
                           "commit": bool(body.get("commit", False))}
        return {"post_fault": self.post_fault}

    def c_clear(self, _body: dict[str, Any]) -> dict[str, Any]:
        self.clear()
        for conn in self.conns:
            conn.mode = None
        return {"cleared": True}

    async def posts_page(self, _req: web.Request) -> web.Response:
        return slack({"posts": self.posts, "attempts": self.attempts})

    async def events_page(self, _req: web.Request) -> web.Response:
        return slack({"events": [ev.describe() for ev in self.events]})

    async def stats_page(self, _req: web.Request) -> web.Response:
        return slack({**self.stats, "live_connections": len(self.conns), "waiting": len(self.waiting),
                      "in_flight": sum(ev.state == "sent" for ev in self.events),
                      "silenced": sum(c.mode == "silence" for c in self.conns),
                      "deaf": sum(c.mode == "deaf" for c in self.conns), "link_disabled": self.link_disabled})

    async def dispatch_loop(self) -> None:
        loop = asyncio.get_running_loop()
        period, deadline = self.args.dispatch_every_ms / 1000, loop.time()
        channels = itertools.cycle(self.args.channels)
        while True:
            deadline += period
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            self.emit(next(channels), f"independent dispatch {self.stats['events_emitted'] + 1}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--public-ws", default="", help="base of the WebSocket URLs handed out, e.g. wss://10.1.1.1:8443")
    p.add_argument("--app-token", default="xapp-1-A0INDEP-1-independent", help="app-level token (xapp)")
    p.add_argument("--bot-token", default="xoxb-independent", help="bot token (xoxb)")
    for flag, default in (("--app-id", "A0INDEP"), ("--team-id", "T0INDEP"), ("--bot-user-id", "U0INDEPBOT"),
                          ("--bot-id", "B0INDEPBOT")):
        p.add_argument(flag, default=default)
    p.add_argument("--channels", default="C0INDEP", help="comma-separated channels chat.postMessage accepts")
    p.add_argument("--ack-timeout-ms", type=int, default=3000)
    p.add_argument("--max-retries", type=int, default=3)
    p.add_argument("--same-envelope-id", action="store_true", help="redeliveries keep their envelope_id")
    p.add_argument("--no-ws-pong", action="store_true", help="do not answer WebSocket pings")
    p.add_argument("--server-ping-ms", type=int, default=0, help="send a WebSocket ping every N ms (0: never)")
    p.add_argument("--dispatch-every-ms", type=int, default=0, help="emit one message event every N ms (0: never)")
    p.add_argument("--max-connections", type=int, default=10)
    p.add_argument("--disconnect-grace-ms", type=int, default=10_000,
                   help="close 1000 this long after a scripted disconnect (not after warning)")
    args = p.parse_args(argv)
    args.channels = [c.strip() for c in args.channels.split(",") if c.strip()]
    if not args.channels:
        p.error("--channels needs at least one channel")
    if args.ack_timeout_ms < 1 or args.max_retries < 0 or args.max_connections < 1:
        p.error("--ack-timeout-ms and --max-connections are positive, --max-retries is >= 0")
    return args


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    srv = Slack(args)
    app = web.Application()
    app.router.add_post("/api/apps.connections.open", srv.connections_open)
    app.router.add_post("/api/auth.test", srv.auth_test)
    app.router.add_post("/api/chat.postMessage", srv.post_message)
    app.router.add_route("*", "/api/{method}", srv.unknown_method)
    app.router.add_get("/link{slash:/?}", srv.link)
    app.router.add_post("/_control/{name}", srv.control)
    app.router.add_get("/_posts", srv.posts_page)
    app.router.add_get("/_independent/stats", srv.stats_page)
    app.router.add_get("/_independent/events", srv.events_page)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=4096)
    await site.start()
    srv.port = runner.addresses[0][1]
    print(f"listening http://{args.host}:{srv.port}", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    dispatcher = asyncio.create_task(srv.dispatch_loop()) if args.dispatch_every_ms > 0 else None
    await stop.wait()
    if dispatcher is not None:
        dispatcher.cancel()
    for conn in list(srv.conns):
        conn.close(1001, "server shutting down")
    deadline = loop.time() + 2
    while srv.conns and loop.time() < deadline:
        await asyncio.sleep(0.05)
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
