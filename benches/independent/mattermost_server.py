#!/usr/bin/env python3
"""Independent Mattermost server (REST v4 + the WebSocket) for the hermes-svc benchmarks.

Written from Mattermost's public API reference (api.mattermost.com: "WebSocket", "Get a
user", "Get all channels from all teams"/"Get channels for user", "Get posts for a channel",
"Create a post") and the server's own sources as the reference describes them
(`deduplicateCreatePost`, 30 s `pending_post_id` window), never from the project's mock or
adapter. What each route does, and its source, is in README.md ("Mattermost").

One asyncio loop serves HTTP and every WebSocket; each socket has its reader (the handler)
and an outbox queue drained by a writer task, so a fault can stop writing without stopping
the reader, and stop reading without stopping the writer.

Resume, from the server's sources (mattermost/mattermost `server/channels/`: `api4/websocket.go`,
`app/platform/web_conn.go`, `web_hub.go`, `websocket_router.go`): a connection (`Conn`)
outlives its socket. Every event written to it is numbered and kept in its dead queue (the
last 128); once its socket is gone it stays, inactive, holding what is broadcast (up to 256,
past which it is dropped) until the reaper forgets it (300 s after it went: the server's
reaper runs every 300 s and takes those whose last activity is older). An upgrade with the token
and `?connection_id=ID&sequence_number=N` takes the inactive connection ID back: N in the dead
queue replays from N, with no `hello`; N-1 the last written sends nothing; else a `hello` with a
new id. Then what was held, numbered on. An unknown ID is a new connection; an invalid ID, or a
known one without N, closes the socket.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import secrets
import signal
import string
import time
from typing import Any

from aiohttp import WSMsgType, web

TOKEN = "independentmattermosttoken"
BOT = {"id": "indepbot00000000000000000a", "username": "hermes"}
HUMAN = {"id": "indephuman0000000000000000", "username": "carol"}
TEAM = "indepteam00000000000000000"
CHANNELS = [
    {"id": "indepopen00000000000000000", "type": "O", "name": "town-square", "display_name": "Town Square"},
    {"id": "indepdirect000000000000000", "type": "D", "name": "carol__hermes", "display_name": "carol"},
]
PENDING_TTL_S = 30.0
DEAD_QUEUE = 128  # deadQueueSize (web_conn.go)
SEND_QUEUE = 256  # sendQueueSize (web_conn.go)
REAP_S = 300.0  # inactiveConnReaperInterval (web_hub.go), also the age it reaps at
STAT_KEYS = ("connections", "live", "refused_upgrades", "challenges", "challenge_fails", "events_sent",
             "replayed", "ws_pings", "me", "channel_lists", "since_calls", "creates", "deduplicated",
             "unauthorized", "resume_asks", "resumed", "resume_replayed", "resume_held", "resume_refused")
ALPHABET = string.ascii_lowercase + string.digits


def new_id() -> str:
    """26 characters of [a-z0-9], the shape of the server's ids."""
    return "".join(secrets.choice(ALPHABET) for _ in range(26))


def now_ms() -> int:
    return int(time.time() * 1000)


def app_error(status: int, ident: str, message: str) -> web.Response:
    body = {"id": ident, "message": message, "detailed_error": "", "request_id": new_id(), "status_code": status}
    return web.json_response(body, status=status)


class Conn:
    """The server's WebConn: the numbering, the dead queue and what is held, across sockets."""

    def __init__(self) -> None:
        self.id = new_id()
        self.seq = 0
        self.dead: collections.deque[dict[str, Any]] = collections.deque(maxlen=DEAD_QUEUE)
        self.held: list[dict[str, Any]] = []
        self.active_at = time.monotonic()

    def number(self, event: dict[str, Any]) -> dict[str, Any]:
        frame = dict(event, seq=self.seq)
        self.seq += 1
        self.dead.append(frame)
        return frame


class Socket:
    def __init__(self, ws: web.WebSocketResponse, transport: Any, conn: Conn) -> None:
        self.ws, self.transport, self.queue = ws, transport, asyncio.Queue()
        self.conn = conn
        self.authed = False
        self.mode = "ok"  # ok | silence | deaf

    def push(self, event: dict[str, Any]) -> None:
        """Written: numbered and kept even into a silenced (half-open) socket, read by nobody."""
        if self.authed:
            frame = self.conn.number(event)
            if self.mode != "silence":
                self.queue.put_nowait(frame)


class Server:
    def __init__(self) -> None:
        self.stats = dict.fromkeys(STAT_KEYS, 0)
        self.sockets: set[Socket] = set()
        self.inactive: dict[str, Conn] = {}
        self.posts: list[dict[str, Any]] = []
        self.pending: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self.events: list[dict[str, Any]] = []
        self.revoked = False
        self.refuse: int | None = None
        self.last_ms = 0

    def authorised(self, token: str | None) -> bool:
        ok = token == TOKEN and not self.revoked
        if not ok:
            self.stats["unauthorized"] += 1
        return ok

    def make_post(self, channel: str, user: str, message: str, root: str = "", pending: str = "") -> dict[str, Any]:
        t = max(now_ms(), self.last_ms + 1)
        self.last_ms = t
        return {"id": new_id(), "create_at": t, "update_at": t, "edit_at": 0, "delete_at": 0, "is_pinned": False,
                "user_id": user, "channel_id": channel, "root_id": root, "original_id": "", "message": message,
                "type": "", "props": {}, "hashtags": "", "pending_post_id": pending, "metadata": {}}

    def publish(self, post: dict[str, Any]) -> None:
        self.posts.append(post)
        channel = next(c for c in CHANNELS if c["id"] == post["channel_id"])
        sender = BOT if post["user_id"] == BOT["id"] else HUMAN
        data = {"channel_display_name": channel["display_name"], "channel_name": channel["name"],
                "channel_type": channel["type"], "post": json.dumps(post), "sender_name": "@" + sender["username"],
                "set_online": True, "team_id": "" if channel["type"] == "D" else TEAM}
        if sender is HUMAN and f"@{BOT['username']}" in post["message"].split():
            data["mentions"] = json.dumps([BOT["id"]])
        event = {"event": "posted", "data": data,
                 "broadcast": {"omit_users": None, "user_id": "", "channel_id": channel["id"], "team_id": ""}}
        self.events.append(event)
        for s in list(self.sockets):
            s.push(event)
            self.stats["events_sent"] += s.mode != "silence" and s.authed
        for conn in list(self.inactive.values()):
            conn.held.append(event)
            if len(conn.held) > SEND_QUEUE:
                del self.inactive[conn.id]  # its send queue is full: closed and removed

    def reap(self) -> None:
        """The hub's reaper: inactive connections gone more than REAP_S ago."""
        t = time.monotonic()
        self.inactive = {k: c for k, c in self.inactive.items() if t - c.active_at <= REAP_S}

    def take(self, query: Any, token: str | None) -> tuple[Conn, list[dict[str, Any]]] | None:
        """The connection an upgrade gets and what to write first; None: close the socket."""
        wanted = query.get("connection_id", "")
        if not wanted or token is None:
            conn = Conn()
            return conn, ([conn.number(self.hello(conn))] if token is not None else [])
        if len(wanted) != 26 or not wanted.isalnum():
            return None
        conn = self.inactive.pop(wanted, None)
        if conn is None:
            conn = Conn()
            return conn, [conn.number(self.hello(conn))]
        try:
            n = int(query.get("sequence_number", ""))
        except ValueError:
            return None
        if n < 0:
            return None
        conn.seq, first, resumed = n, [], True
        if n != 0:
            at = next((i for i, e in enumerate(conn.dead) if e["seq"] == n), None)
            if at is not None:
                first = list(conn.dead)[at:]
                conn.seq = n + len(first)
            elif conn.dead and conn.dead[-1]["seq"] != n - 1:
                conn.dead.clear()
                conn.id, conn.seq, resumed = new_id(), 0, False
                first = [conn.number(self.hello(conn))]
        self.stats["resumed"] += resumed
        self.stats["resume_replayed"] += len(first) if resumed else 0
        self.stats["resume_held"] += len(conn.held)
        first += [conn.number(e) for e in conn.held]
        conn.held, conn.active_at = [], time.monotonic()
        return conn, first

    @staticmethod
    def hello(conn: Conn) -> dict[str, Any]:
        return {"event": "hello", "data": {"connection_id": conn.id, "server_version": "9.11.0.independent"},
                "broadcast": {"omit_users": None, "user_id": BOT["id"], "channel_id": "", "team_id": ""}}


def bearer(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    for scheme in ("Bearer ", "BEARER ", "Token "):
        if auth.startswith(scheme):
            return auth[len(scheme):].strip()
    return None


def routes(srv: Server) -> web.Application:
    app = web.Application()

    async def me(request: web.Request) -> web.Response:
        srv.stats["me"] += 1
        if not srv.authorised(bearer(request)):
            return app_error(401, "api.context.session_expired.app_error", "Invalid or expired session, please login again.")
        return web.json_response(dict(BOT, is_bot=True, delete_at=0, roles="system_user"))

    async def my_channels(request: web.Request) -> web.Response:
        srv.stats["channel_lists"] += 1
        if not srv.authorised(bearer(request)):
            return app_error(401, "api.context.session_expired.app_error", "Invalid or expired session, please login again.")
        return web.json_response([dict(c, team_id="" if c["type"] == "D" else TEAM) for c in CHANNELS])

    async def channel_posts(request: web.Request) -> web.Response:
        srv.stats["since_calls"] += 1
        if not srv.authorised(bearer(request)):
            return app_error(401, "api.context.session_expired.app_error", "Invalid or expired session, please login again.")
        channel = request.match_info["channel"]
        if channel not in {c["id"] for c in CHANNELS}:
            return app_error(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
        since = int(request.query.get("since", "0") or 0)
        # "since": posts created or modified after the time, newest first in `order`.
        picked = [p for p in srv.posts if p["channel_id"] == channel and p["update_at"] >= since]
        return web.json_response({"order": [p["id"] for p in reversed(picked)], "posts": {p["id"]: p for p in picked},
                                  "next_post_id": "", "prev_post_id": ""})

    async def create(request: web.Request) -> web.StreamResponse:
        srv.stats["creates"] += 1
        if not srv.authorised(bearer(request)):
            return app_error(401, "api.context.session_expired.app_error", "Invalid or expired session, please login again.")
        try:
            body = await request.json()
        except ValueError:
            return app_error(400, "api.context.invalid_body_param.app_error", "Invalid or missing post in request body.")
        channel, pending = body.get("channel_id", ""), body.get("pending_post_id", "")
        if channel not in {c["id"] for c in CHANNELS}:
            return app_error(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
        t = time.monotonic()
        srv.pending = {k: v for k, v in srv.pending.items() if t - v[0] < PENDING_TTL_S}
        if pending and pending in srv.pending:
            first = srv.pending[pending][1]
            if first is None:
                return app_error(500, "api.post.deduplicate_create_post.pending", "Post creation is already in progress.")
            srv.stats["deduplicated"] += 1
            return web.json_response(first, status=201)
        if pending:
            srv.pending[pending] = (t, None)
        post = srv.make_post(channel, BOT["id"], body.get("message", ""), body.get("root_id", ""), pending)
        srv.publish(post)
        if pending:
            srv.pending[pending] = (t, post)
        return web.json_response(post, status=201)

    async def websocket(request: web.Request) -> web.StreamResponse:
        if request.query.get("connection_id"):
            srv.stats["resume_asks"] += 1
        token = bearer(request)
        if srv.refuse is not None or (token is not None and not srv.authorised(token)):
            srv.stats["refused_upgrades"] += 1
            return app_error(srv.refuse or 401, "api.web_socket.connect.upgrade.app_error", "Failed to upgrade websocket connection.")
        ws = web.WebSocketResponse(autoping=False, max_msg_size=1 << 20)
        await ws.prepare(request)
        srv.reap()
        taken = srv.take(request.query, token)
        if taken is None:
            srv.stats["resume_refused"] += 1
            if request.transport is not None:
                request.transport.abort()  # `ws.Close()`: no close frame
            return ws
        conn, first = taken
        sock = Socket(ws, request.transport, conn)
        sock.authed = token is not None
        for frame in first:
            sock.queue.put_nowait(frame)
        srv.sockets.add(sock)
        srv.stats["connections"] += 1
        srv.stats["live"] = len(srv.sockets)

        async def writer() -> None:
            while True:
                frame = await sock.queue.get()
                if sock.mode == "silence":
                    continue
                await ws.send_str(json.dumps(frame))

        task = asyncio.create_task(writer())
        try:
            async for msg in ws:
                if sock.mode != "ok":
                    continue  # silence and deaf: nothing the client sends is read, no pong
                if msg.type == WSMsgType.PING:
                    srv.stats["ws_pings"] += 1
                    await ws.pong(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    await on_action(srv, sock, msg.data)
        finally:
            task.cancel()
            srv.sockets.discard(sock)
            srv.stats["live"] = len(srv.sockets)
            if sock.authed:  # in the hub: kept, inactive, for a resume
                conn.active_at = time.monotonic()
                srv.inactive[conn.id] = conn
        return ws

    async def control_emit(request: web.Request) -> web.Response:
        body = await request.json()
        ids = []
        for i in range(int(body.get("count", 1))):
            post = srv.make_post(body.get("channel", CHANNELS[0]["id"]), HUMAN["id"], body.get("message", f"independent {len(srv.posts) + 1}"))
            srv.publish(post)
            ids.append(post["id"])
        return web.json_response({"post_ids": ids})

    async def control_fault(request: web.Request) -> web.Response:
        kind = (await request.json()).get("kind")
        for s in list(srv.sockets):
            if kind in ("silence", "deaf"):
                s.mode = kind
            elif kind == "drop":
                if s.transport is not None:
                    s.transport.abort()  # no close frame: the TCP connection goes
            elif kind == "close":
                await s.ws.close(code=1001)
        if kind == "revoke":
            srv.revoked = True
        if kind == "refuse":
            srv.refuse = 503
        return web.json_response({"ok": True})

    async def control_replay(request: web.Request) -> web.Response:
        n = int((await request.json()).get("count", 1))
        for event in srv.events[-n:]:
            for s in list(srv.sockets):
                s.push(event)
                srv.stats["replayed"] += 1
        return web.json_response({"ok": True})

    async def control_forget(request: web.Request) -> web.Response:
        srv.inactive.clear()  # a restart: every resume gets a new connection
        return web.json_response({"ok": True})

    async def control_clear(request: web.Request) -> web.Response:
        srv.revoked, srv.refuse = False, None
        return web.json_response({"ok": True})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(srv.stats)

    app.router.add_get("/api/v4/users/me", me)
    app.router.add_get("/api/v4/users/me/channels", my_channels)
    app.router.add_get("/api/v4/channels/{channel}/posts", channel_posts)
    app.router.add_post("/api/v4/posts", create)
    app.router.add_get("/api/v4/websocket", websocket)
    app.router.add_post("/_control/emit", control_emit)
    app.router.add_post("/_control/fault", control_fault)
    app.router.add_post("/_control/replay", control_replay)
    app.router.add_post("/_control/clear", control_clear)
    app.router.add_post("/_control/forget", control_forget)
    app.router.add_get("/_independent/stats", stats)
    return app


async def on_action(srv: Server, sock: Socket, text: str) -> None:
    """A client action (`websocket_router.go`): the challenge (ignored, unanswered, on a
    connection already authenticated; `hello` then OK on one that was not), `ping` (`pong`,
    `wsapi/system.go`); anything else FAIL."""
    try:
        action = json.loads(text)
    except ValueError:
        return
    seq = action.get("seq")
    if action.get("action") == "authentication_challenge":
        srv.stats["challenges"] += 1
        if sock.authed:
            return
        if srv.authorised((action.get("data") or {}).get("token")):
            sock.authed = True
            sock.push(Server.hello(sock.conn))
            sock.queue.put_nowait({"status": "OK", "seq_reply": seq})
            return
        srv.stats["challenge_fails"] += 1
    elif action.get("action") == "ping" and sock.authed:
        data = {"text": "pong", "version": "9.11.0", "server_time": now_ms(), "node_id": ""}
        sock.queue.put_nowait({"status": "OK", "seq_reply": seq, "data": data})
        return
    sock.queue.put_nowait({"status": "FAIL", "seq_reply": seq,
                           "error": {"id": "api.web_socket_router.bad_action.app_error", "message": "not served"}})


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    runner = web.AppRunner(routes(Server()))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"listening http://127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
