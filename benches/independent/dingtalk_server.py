#!/usr/bin/env python3
"""Independent DingTalk Stream-mode + robot API server for the hermes-svc benchmarks.

Written from DingTalk's public docs (open.dingtalk.com: the Stream mode protocol, the access
token, the robot's 1:1 and group send APIs) and the facts issue 50 measured against the
official `dingtalk-stream` client, never from the project's mock or adapter. Where the docs are
silent, the choice is in README.md ("DingTalk Stream + robot API").

One asyncio loop serves HTTP and every WebSocket. The handler always reads, so that a fault can
ignore what it reads: under "silence" nothing is written or answered (a half-open socket), under
"deaf" robot messages keep going out but nothing the client sends is heeded (no pong, no ack).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from typing import Any

from aiohttp import WSMsgType, web

ROBOT_TOPIC = "/v1.0/im/bot/messages/get"
STAT_KEYS = ("tickets", "open_refused", "tickets_refused", "connections", "callbacks", "redeliveries", "acks",
             "stray_acks", "system_pings", "system_answers", "ws_pings", "disconnects", "given_up", "tokens",
             "posts", "post_requests")


def now_ms() -> int:
    return int(time.time() * 1000)


def error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message, "requestid": secrets.token_hex(8)}, status=status)


class Message:
    """One robot message: `msgId` stays, every push is a frame with a new `messageId`."""

    def __init__(self, msg_id: str, data: dict[str, Any]) -> None:
        self.msg_id, self.data = msg_id, data
        self.pushes: list[str] = []
        self.acked = False
        self.timer: asyncio.TimerHandle | None = None


class Conn:
    def __init__(self, cid: int, ws: web.WebSocketResponse, transport: Any) -> None:
        self.id, self.ws, self.transport = cid, ws, transport
        self.mode: str | None = None  # None | "silence" | "deaf"
        self.leaving = False  # told `disconnect`: nothing more is pushed here


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.a = args
        self.port = 0
        self.tickets: dict[str, float] = {}
        self.conns: list[Conn] = []
        self.next_conn = 0
        self.turn = 0
        self.messages: dict[str, Message] = {}
        self.frames: dict[str, Message] = {}
        self.waiting: list[Message] = []
        self.tokens: set[str] = set()
        self.revoked = False
        self.stats = dict.fromkeys(STAT_KEYS, 0)
        self.posts: list[dict[str, Any]] = []
        self.serial = 0

    def next(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial:010d}"

    def credentials_ok(self, cid: Any, secret: Any) -> bool:
        return not self.revoked and cid == self.a.client_id and secret == self.a.client_secret

    # --- OpenAPI -------------------------------------------------------------------------------
    async def open(self, request: web.Request) -> web.Response:
        body = await request.json(loads=json.loads)
        if not self.credentials_ok(body.get("clientId"), body.get("clientSecret")):
            self.stats["open_refused"] += 1
            return error(400, "invalidClientIdOrSecret", "无效的clientId或者clientSecret")
        ticket = secrets.token_urlsafe(24)
        self.tickets[ticket] = time.monotonic()
        self.stats["tickets"] += 1
        return web.json_response({"endpoint": f"ws://127.0.0.1:{self.port}/connect", "ticket": ticket})

    async def token(self, request: web.Request) -> web.Response:
        body = await request.json(loads=json.loads)
        if not self.credentials_ok(body.get("appKey"), body.get("appSecret")):
            return error(400, "invalidClientIdOrSecret", "无效的clientId或者clientSecret")
        token = secrets.token_hex(16)
        self.tokens.add(token)
        self.stats["tokens"] += 1
        return web.json_response({"accessToken": token, "expireIn": 7200})

    async def send(self, request: web.Request) -> web.Response:
        self.stats["post_requests"] += 1
        if request.headers.get("x-acs-dingtalk-access-token") not in self.tokens or self.revoked:
            return error(401, "InvalidAuthentication", "不合法的access_token")
        body = await request.json(loads=json.loads)
        param = json.loads(body.get("msgParam") or "null") or {}
        group = request.path.endswith("groupMessages/send")
        to = body.get("openConversationId") if group else (body.get("userIds") or [None])[0]
        key = self.next("indepQueryKey")
        self.posts.append({"to": to, "group": group, "content": param.get("content"),
                           "process_query_key": key, "received_unix_ms": now_ms()})
        self.stats["posts"] += 1
        if group:
            return web.json_response({"processQueryKey": key})
        return web.json_response({"processQueryKey": key, "invalidStaffIdList": [], "flowControlledStaffIdList": []})

    # --- Stream --------------------------------------------------------------------------------
    async def connect(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        issued = self.tickets.pop(ticket, None)
        if issued is None or time.monotonic() - issued > 90:
            self.stats["tickets_refused"] += 1
            return error(401, "InvalidTicket", "ticket is invalid or expired")
        ws = web.WebSocketResponse(autoping=False, autoclose=False, compress=False)
        await ws.prepare(request)
        self.next_conn += 1
        conn = Conn(self.next_conn, ws, request.transport)
        self.conns.append(conn)
        self.stats["connections"] += 1
        for m in self.waiting[:]:
            self.waiting.remove(m)
            await self.push(m, again=True)
        pinger = asyncio.create_task(self.system_pings(conn)) if self.a.system_ping_s > 0 else None
        try:
            async for msg in ws:
                if msg.type == WSMsgType.PING:
                    self.stats["ws_pings"] += 1
                    if conn.mode is None:
                        await ws.pong(msg.data)
                elif msg.type == WSMsgType.TEXT and conn.mode is None:
                    self.answer(json.loads(msg.data))
                elif msg.type in (WSMsgType.CLOSE, WSMsgType.ERROR):
                    break
        finally:
            if pinger:
                pinger.cancel()
            if conn in self.conns:
                self.conns.remove(conn)
        return ws

    def frame(self, kind: str, topic: str, message_id: str, data: dict[str, Any]) -> str:
        headers = {"topic": topic, "messageId": message_id, "contentType": "application/json",
                   "time": str(now_ms()), "appId": "indep-app"}
        return json.dumps({"specVersion": "1.0", "type": kind, "headers": headers, "data": json.dumps(data)})

    async def write(self, conn: Conn, text: str) -> None:
        if conn.mode == "silence" or conn.ws.closed:
            return
        try:
            await conn.ws.send_str(text)
        except ConnectionError:
            pass

    async def system_pings(self, conn: Conn) -> None:
        while True:
            await asyncio.sleep(self.a.system_ping_s)
            self.stats["system_pings"] += 1
            await self.write(conn, self.frame("SYSTEM", "ping", self.next("sysping"), {"opaque": self.next("o")}))

    def answer(self, v: dict[str, Any]) -> None:
        mid = (v.get("headers") or {}).get("messageId", "")
        if mid.startswith("sysping"):
            self.stats["system_answers"] += 1
            return
        self.stats["acks"] += 1
        m = self.frames.get(mid)
        if m is None or m.acked or v.get("code") != 200:
            self.stats["stray_acks"] += 1
            return
        m.acked = True
        if m.timer:
            m.timer.cancel()

    async def push(self, m: Message, again: bool) -> None:
        live = [c for c in self.conns if not c.leaving]
        if not live:
            self.waiting.append(m)
            return
        self.turn += 1
        conn = live[self.turn % len(live)]
        mid = self.next("indepframe")
        m.pushes.append(mid)
        self.frames[mid] = m
        self.stats["callbacks"] += 1
        if again:
            self.stats["redeliveries"] += 1
        await self.write(conn, self.frame("CALLBACK", ROBOT_TOPIC, mid, m.data))
        loop = asyncio.get_running_loop()
        m.timer = loop.call_later(self.a.ack_timeout_s, lambda: asyncio.ensure_future(self.unacked(m)))

    async def unacked(self, m: Message) -> None:
        if m.acked:
            return
        if len(m.pushes) > self.a.max_retries:
            self.stats["given_up"] += 1
            return
        await self.push(m, again=True)

    # --- control -------------------------------------------------------------------------------
    async def emit(self, request: web.Request) -> web.Response:
        body = await request.json(loads=json.loads)
        ids = []
        for _ in range(int(body.get("count", 1))):
            msg_id = self.next("indepMsg")
            data = {"conversationId": "cidIndepGroup==", "conversationType": "2", "msgId": msg_id,
                    "senderStaffId": "indepstaff", "senderId": "$:LWCP_v1:$indep", "senderNick": "Indep",
                    "isInAtList": True, "robotCode": self.a.client_id, "createAt": now_ms(),
                    "msgtype": "text", "text": {"content": f"independent {msg_id}"}}
            m = Message(msg_id, data)
            self.messages[msg_id] = m
            ids.append(msg_id)
            await self.push(m, again=False)
        return web.json_response({"msg_ids": ids})

    async def fault(self, request: web.Request) -> web.Response:
        kind = (await request.json(loads=json.loads)).get("kind")
        for conn in list(self.conns):
            if kind in ("silence", "deaf"):
                conn.mode = kind
            elif kind == "drop":
                if conn.transport is not None:
                    conn.transport.abort()  # no close frame, no FIN handshake: a reset
            elif kind == "disconnect":
                self.stats["disconnects"] += 1
                conn.leaving = True
                await self.write(conn, self.frame("SYSTEM", "disconnect", self.next("sysdisc"), {}))
                asyncio.get_running_loop().call_later(self.a.disconnect_grace_s,
                                                      lambda c=conn: asyncio.ensure_future(c.ws.close()))
            elif kind == "revoke":
                self.revoked = True
        return web.json_response({"ok": True, "connections": len(self.conns)})

    async def clear(self, _request: web.Request) -> web.Response:
        self.revoked = False
        return web.json_response({"ok": True})

    async def stats_view(self, _request: web.Request) -> web.Response:
        out = dict(self.stats)
        out["live_connections"] = len(self.conns)
        out["acked"] = sum(m.acked for m in self.messages.values())
        return web.json_response(out)

    async def posts_view(self, _request: web.Request) -> web.Response:
        return web.json_response({"posts": self.posts})


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--client-id", default="dingindependent")
    p.add_argument("--client-secret", default="independent-secret")
    p.add_argument("--ack-timeout-s", type=float, default=60.0, help="a robot message not acked is pushed again")
    p.add_argument("--max-retries", type=int, default=1)
    p.add_argument("--system-ping-s", type=float, default=0.0, help="SYSTEM ping cadence; 0: none")
    p.add_argument("--disconnect-grace-s", type=float, default=10.0)
    args = p.parse_args()
    server = Server(args)
    app = web.Application()
    app.router.add_post("/v1.0/gateway/connections/open", server.open)
    app.router.add_post("/v1.0/oauth2/accessToken", server.token)
    app.router.add_post("/v1.0/robot/oToMessages/batchSend", server.send)
    app.router.add_post("/v1.0/robot/groupMessages/send", server.send)
    app.router.add_get("/connect", server.connect)
    app.router.add_post("/_control/emit", server.emit)
    app.router.add_post("/_control/fault", server.fault)
    app.router.add_post("/_control/clear", server.clear)
    app.router.add_get("/_independent/stats", server.stats_view)
    app.router.add_get("/_posts", server.posts_view)
    runner = web.AppRunner(app, handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    server.port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001
    print(f"listening http://127.0.0.1:{server.port}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
