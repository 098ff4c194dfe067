#!/usr/bin/env python3
"""Independent WeCom AI-bot (智能机器人) long-connection server for the hermes-svc benchmarks.

Written only from WeCom's docs ("智能机器人长连接", developer.work.weixin.qq.com/document/path/101463)
and the official SDK's source (@wecom/aibot-node-sdk 1.0.7: WsCmd, handleFrame, sendHeartbeat,
sendReply, types/message.d.ts), never from the project's own mock or adapter. Sources and the choices
made where the docs say nothing are in README.md ("WeCom AI bot long connection").

One asyncio loop serves HTTP and every WebSocket (at the root path, as the real service). Each socket
has one reader (the handler, which keeps reading so that a client's FIN is seen, whatever a fault
ignores) and writes under the connection's own lock.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import signal
import sys
import time
from typing import Any

from aiohttp import WSMsgType, web

SOCKET_FAULTS = ("silence", "no_pong", "drop", "close", "kick")
STAT_KEYS = ("connections", "subscribed", "refused", "kicked", "pings", "pongs", "callbacks_sent",
             "redeliveries", "replies", "refreshes", "sends", "bad_req_ids", "answers_withheld")


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def answer(req_id: str, errcode: int = 0, errmsg: str = "ok") -> str:
    """The server's answer to a command: no cmd, the command's req_id, errcode and errmsg (SDK handleFrame)."""
    return dumps({"headers": {"req_id": req_id}, "errcode": errcode, "errmsg": errmsg})


class Conn:
    def __init__(self, srv: "WeCom", ws: web.WebSocketResponse, transport: Any) -> None:
        self.srv, self.ws, self.transport = srv, ws, transport
        self.id = next(srv.ids)
        self.silent = False
        self.lock = asyncio.Lock()

    async def send(self, text: str) -> bool:
        if self.silent or self.ws.closed:
            return False
        async with self.lock:
            try:
                await self.ws.send_str(text)
                return True
            except (ConnectionError, RuntimeError):
                return False


class WeCom:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ids = itertools.count(1)
        self.seq = itertools.count(1)
        self.conns: set[Conn] = set()
        self.holder: Conn | None = None
        self.stats = {k: 0 for k in STAT_KEYS}
        self.bodies: dict[str, dict[str, Any]] = {}
        self.deliveries: dict[str, list[str]] = {}
        self.req_ids: set[str] = set()
        self.waiting: list[str] = []  # callbacks made while nobody held the bot
        self.posts: list[dict[str, Any]] = []
        self.streams: dict[tuple[str, str], int] = {}
        self.no_pong = False
        self.revoked = False
        self.withhold = 0
        self.port = 0

    # -- the long connection --------------------------------------------------------------------
    async def socket(self, req: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=False, max_msg_size=4 * 1024 * 1024)
        await ws.prepare(req)
        conn = Conn(self, ws, req.transport)
        self.conns.add(conn)
        self.stats["connections"] += 1
        try:
            first = await asyncio.wait_for(ws.receive(), self.args.subscribe_within_ms / 1000)
            if not await self.subscribe(conn, first):
                await ws.close(code=1000)
                return ws
            async for msg in ws:
                if msg.type != WSMsgType.TEXT or conn.silent:
                    continue
                await self.command(conn, msg.data)
        except asyncio.TimeoutError:
            await ws.close(code=1000)
        finally:
            self.conns.discard(conn)
            if self.holder is conn:
                self.holder = None
        return ws

    async def subscribe(self, conn: Conn, msg: Any) -> bool:
        try:
            frame = json.loads(msg.data) if msg.type == WSMsgType.TEXT else {}
        except ValueError:
            frame = {}
        if not isinstance(frame, dict) or frame.get("cmd") != "aibot_subscribe":
            return False
        req_id = str((frame.get("headers") or {}).get("req_id") or "")
        body = frame.get("body") or {}
        if self.revoked or body.get("bot_id") != self.args.bot_id or body.get("secret") != self.args.secret:
            self.stats["refused"] += 1
            await conn.send(answer(req_id, 40001, "invalid credential"))
            return False
        old, self.holder = self.holder, conn
        self.stats["subscribed"] += 1
        await conn.send(answer(req_id))
        if old is not None and old is not conn:
            await self.kick(old)
        waiting, self.waiting = self.waiting, []
        for text in waiting:
            await conn.send(text)
        return True

    async def kick(self, conn: Conn) -> None:
        """The docs' 连接断开事件: the old connection is told, then closed by the server."""
        self.stats["kicked"] += 1
        n = next(self.seq)
        event = {"cmd": "aibot_event_callback", "headers": {"req_id": f"kick-{n}"},
                 "body": {"msgid": f"kick{n}", "create_time": int(time.time()), "aibotid": self.args.bot_id,
                          "msgtype": "event", "event": {"eventtype": "disconnected_event"}}}
        await conn.send(dumps(event))
        # Closed beside, not awaited: a close waits for the client's answer, which a silent or
        # vanished client never gives, and the new holder must not wait for it.
        asyncio.ensure_future(conn.ws.close(code=1000))

    async def command(self, conn: Conn, text: str) -> None:
        try:
            frame = json.loads(text)
        except ValueError:
            return
        if not isinstance(frame, dict):
            return
        req_id = str((frame.get("headers") or {}).get("req_id") or "")
        cmd, body = frame.get("cmd"), frame.get("body") or {}
        if cmd == "ping":
            self.stats["pings"] += 1
            if not self.no_pong:
                self.stats["pongs"] += 1
                await conn.send(answer(req_id))
            return
        if cmd == "aibot_respond_msg":
            code, msg = self.reply(req_id, body)
        elif cmd == "aibot_send_msg":
            code, msg = self.proactive(req_id, body)
        else:
            code, msg = 40008, "unsupported cmd"
        if code == 0 and self.withhold > 0:
            self.withhold -= 1
            self.stats["answers_withheld"] += 1
            return
        await conn.send(answer(req_id, code, msg))

    def reply(self, req_id: str, body: dict[str, Any]) -> tuple[int, str]:
        if req_id not in self.req_ids:
            self.stats["bad_req_ids"] += 1
            return 40058, "req_id not found"
        stream = body.get("stream") if isinstance(body.get("stream"), dict) else None
        if body.get("msgtype") != "stream" or stream is None or not stream.get("id"):
            return 40008, "invalid msgtype"
        key = (req_id, str(stream["id"]))
        if key in self.streams:  # the same stream: its content refreshed, no new message
            self.stats["refreshes"] += 1
            self.posts[self.streams[key]]["content"] = str(stream.get("content", ""))
            return 0, "ok"
        self.stats["replies"] += 1
        self.streams[key] = len(self.posts)
        self.posts.append({"cmd": "aibot_respond_msg", "req_id": req_id, "stream_id": key[1],
                           "content": str(stream.get("content", "")), "received_unix_ms": int(time.time() * 1000)})
        return 0, "ok"

    def proactive(self, req_id: str, body: dict[str, Any]) -> tuple[int, str]:
        markdown = body.get("markdown") if isinstance(body.get("markdown"), dict) else {}
        if not body.get("chatid") or "content" not in markdown:
            return 40008, "invalid message"
        self.stats["sends"] += 1
        self.posts.append({"cmd": "aibot_send_msg", "req_id": req_id, "chatid": str(body["chatid"]),
                           "content": str(markdown["content"]), "received_unix_ms": int(time.time() * 1000)})
        return 0, "ok"

    async def deliver(self, msgid: str) -> None:
        """A callback: a fresh req_id per delivery, the body (and its msgid) the same every time."""
        req_id = f"aibot_msg_callback_{next(self.seq)}_{int(time.time() * 1000)}"
        self.req_ids.add(req_id)
        self.deliveries.setdefault(msgid, []).append(req_id)
        text = dumps({"cmd": "aibot_msg_callback", "headers": {"req_id": req_id}, "body": self.bodies[msgid]})
        self.stats["callbacks_sent"] += 1
        if self.holder is None:
            self.waiting.append(text)
        else:
            await self.holder.send(text)

    # -- control ---------------------------------------------------------------------------------
    async def control(self, req: web.Request) -> web.Response:
        body = await req.json() if req.can_read_body else {}
        name = req.match_info["name"]
        if name == "emit":
            msgids = []
            for _ in range(int(body.get("count", 1))):
                n = next(self.seq)
                msgid = f"indep{n:07d}"
                self.bodies[msgid] = {"msgid": msgid, "aibotid": self.args.bot_id, "chattype": "single",
                                      "from": {"userid": self.args.user}, "create_time": int(time.time()),
                                      "msgtype": "text", "text": {"content": f"independent message {n}"}}
                msgids.append(msgid)
                await self.deliver(msgid)
            return web.json_response({"msgids": msgids})
        if name == "redeliver":
            known = [m for m in body.get("msgids", []) if m in self.bodies]
            for msgid in known:
                self.stats["redeliveries"] += 1
                await self.deliver(msgid)
            return web.json_response({"redelivered": len(known)})
        if name == "fault":
            return web.json_response(await self.fault(str(body.get("kind", "")), int(body.get("code", 1000))))
        if name == "revoke":
            self.revoked = True
            return web.json_response({"ok": True})
        if name == "withhold":
            self.withhold = int(body.get("count", 1))
            return web.json_response({"ok": True})
        if name == "clear":
            self.no_pong, self.revoked, self.withhold = False, False, 0
            return web.json_response({"ok": True})
        return web.json_response({"error": "unknown control route"}, status=404)

    async def fault(self, kind: str, code: int) -> dict[str, Any]:
        if kind not in SOCKET_FAULTS:
            return {"error": f"kind is one of {SOCKET_FAULTS}"}
        if kind == "no_pong":
            self.no_pong = True
            return {"ok": True}
        conn = self.holder
        if conn is None:
            return {"ok": False, "error": "no connection holds the bot"}
        if kind == "silence":  # half-open: nothing more read or written, no close, no FIN
            conn.silent = True
        elif kind == "drop":
            conn.transport.abort() if conn.transport is not None else None
        elif kind == "close":
            await conn.ws.close(code=code)
        elif kind == "kick":
            self.holder = None
            await self.kick(conn)
        return {"ok": True}

    async def stats_page(self, _req: web.Request) -> web.Response:
        return web.json_response({**self.stats, "live": self.holder is not None, "open": len(self.conns)})

    async def posts_page(self, _req: web.Request) -> web.Response:
        return web.json_response({"posts": self.posts})

    async def events_page(self, _req: web.Request) -> web.Response:
        return web.json_response({"events": [{"msgid": m, "req_ids": r} for m, r in self.deliveries.items()]})


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--bot-id", default="aibIndependent01")
    p.add_argument("--secret", default="independent-wecom-secret")
    p.add_argument("--user", default="lisi", help="the userid every emitted message comes from")
    p.add_argument("--subscribe-within-ms", type=int, default=10_000)
    return p.parse_args(argv)


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    srv = WeCom(args)
    app = web.Application()
    app.router.add_get("/", srv.socket)
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
    await stop.wait()
    for conn in list(srv.conns):
        conn.silent = False
        await conn.ws.close(code=1001)
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
