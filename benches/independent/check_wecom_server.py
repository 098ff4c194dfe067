#!/usr/bin/env python3
"""Self-check for wecom_server.py: starts it on port 0, exercises the subscription, pings, callbacks,
replies (and their stream refresh), proactive sends, the kick, every fault and the control routes over
real HTTP and WebSocket, and exits non-zero on any mismatch.

    PY="$(scripts/bench-deps | tail -1)"; "$PY" benches/independent/check_wecom_server.py
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import aiohttp

HERE = os.path.dirname(os.path.abspath(__file__))
BOT, SECRET = "aibCheck", "check-secret"
failures: list[str] = []


def check(ok: bool, name: str, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {str(detail)[:600]}"), flush=True)
    if not ok:
        failures.append(name)


async def frame(ws: aiohttp.ClientWebSocketResponse, timeout: float = 2.0) -> dict[str, Any] | None:
    try:
        msg = await ws.receive(timeout)
    except asyncio.TimeoutError:
        return None
    return json.loads(msg.data) if msg.type == aiohttp.WSMsgType.TEXT else {"_type": msg.type}


async def command(ws: aiohttp.ClientWebSocketResponse, cmd: str, req_id: str, body: Any = None) -> None:
    f: dict[str, Any] = {"cmd": cmd, "headers": {"req_id": req_id}}
    if body is not None:
        f["body"] = body
    await ws.send_str(json.dumps(f))


async def run(base: str, http: aiohttp.ClientSession) -> None:
    ws_url = base.replace("http", "ws", 1) + "/"

    async def control(name: str, body: Any = None) -> Any:
        async with http.post(f"{base}/_control/{name}", json=body or {}) as r:
            return await r.json()

    async def stats() -> Any:
        async with http.get(f"{base}/_independent/stats") as r:
            return await r.json()

    async def subscribed(secret: str = SECRET) -> tuple[aiohttp.ClientWebSocketResponse, dict[str, Any] | None]:
        ws = await http.ws_connect(ws_url)
        await command(ws, "aibot_subscribe", "aibot_subscribe_1", {"bot_id": BOT, "secret": secret})
        return ws, await frame(ws)

    bad, a = await subscribed("wrong")
    check(a is not None and a.get("errcode") == 40001 and "cmd" not in a, "a wrong secret is refused", a)
    f = await frame(bad)
    check(f is not None and f.get("_type") == aiohttp.WSMsgType.CLOSE, "and closed", f)
    ws, a = await subscribed()
    check(a == {"headers": {"req_id": "aibot_subscribe_1"}, "errcode": 0, "errmsg": "ok"}, "subscribed", a)
    await command(ws, "ping", "ping_1")
    a = await frame(ws)
    check(a is not None and a["headers"]["req_id"] == "ping_1" and a["errcode"] == 0, "ping answered", a)

    msgid = (await control("emit", {"count": 1}))["msgids"][0]
    cb = await frame(ws)
    check(cb is not None and cb["cmd"] == "aibot_msg_callback" and cb["body"]["msgid"] == msgid, "a callback", cb)
    req_id = cb["headers"]["req_id"] if cb else ""
    reply = {"msgtype": "stream", "stream": {"id": "s1", "finish": True, "content": "one"}}
    await command(ws, "aibot_respond_msg", req_id, reply)
    a = await frame(ws)
    check(a is not None and a["errcode"] == 0 and a["headers"]["req_id"] == req_id, "a reply accepted", a)
    reply["stream"]["content"] = "two"
    await command(ws, "aibot_respond_msg", req_id, reply)
    await frame(ws)
    async with http.get(f"{base}/_posts") as r:
        posts = (await r.json())["posts"]
    check(len(posts) == 1 and posts[0]["content"] == "two", "the same stream id refreshes one message", posts)
    await command(ws, "aibot_respond_msg", "nobody", reply)
    a = await frame(ws)
    check(a is not None and a["errcode"] == 40058, "a reply under an unknown req_id is refused", a)
    await command(ws, "aibot_send_msg", "aibot_send_msg_1",
                  {"chatid": "lisi", "msgtype": "markdown", "markdown": {"content": "hi"}})
    a = await frame(ws)
    check(a is not None and a["errcode"] == 0, "a proactive message accepted", a)

    await control("redeliver", {"msgids": [msgid]})
    again = await frame(ws)
    check(again is not None and again["body"]["msgid"] == msgid and again["headers"]["req_id"] != req_id,
          "a redelivery keeps the msgid under a new req_id", again)

    await control("withhold", {"count": 1})
    await command(ws, "aibot_send_msg", "aibot_send_msg_2",
                  {"chatid": "lisi", "msgtype": "markdown", "markdown": {"content": "lost"}})
    check((await frame(ws, 0.5)) is None, "a withheld answer never comes")
    await control("fault", {"kind": "no_pong"})
    await command(ws, "ping", "ping_2")
    check((await frame(ws, 0.5)) is None, "no_pong: a ping unanswered")
    await control("clear")
    await command(ws, "ping", "ping_3")
    check((await frame(ws)) is not None, "clear: pings answered again")

    second, a = await subscribed()
    check(a is not None and a["errcode"] == 0, "a second subscription accepted", a)
    kick = await frame(ws)
    check(kick is not None and kick.get("cmd") == "aibot_event_callback"
          and kick["body"]["event"]["eventtype"] == "disconnected_event", "the first is kicked", kick)
    closed = await frame(ws)
    check(closed is not None and closed.get("_type") == aiohttp.WSMsgType.CLOSE, "and closed", closed)

    await control("fault", {"kind": "silence"})
    await command(second, "ping", "ping_4")
    check((await frame(second, 0.5)) is None, "silence: nothing answered")
    check(not second.closed, "silence: nothing closed")
    await second.close()
    third, a = await subscribed()
    check(a is not None and a["errcode"] == 0, "a new connection after the silence", a)
    await control("fault", {"kind": "drop"})
    f = await frame(third)
    check(f is not None and f.get("_type") in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR),
          "drop: the socket ends without a close frame", f)
    await control("revoke")
    _, a = await subscribed()
    check(a is not None and a["errcode"] == 40001, "a revoked secret is refused", a)
    s = await stats()
    check(s["kicked"] == 1 and s["redeliveries"] == 1 and s["answers_withheld"] == 1, "stats", s)


async def main() -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, os.path.join(HERE, "wecom_server.py"), "--port", "0", "--bot-id", BOT,
        "--secret", SECRET, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    line = (await proc.stdout.readline()).decode().strip()
    base = line.removeprefix("listening ")
    try:
        async with aiohttp.ClientSession() as http:
            await run(base, http)
    finally:
        proc.terminate()
        await proc.wait()
    print(f"{len(failures)} failures" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
