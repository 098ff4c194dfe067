#!/usr/bin/env python3
"""Self-check for poll_server.py: starts it on port 0, exercises every endpoint and every fault
once over real HTTP, and exits non-zero on any mismatch.

    PY="$(scripts/bench-deps | tail -1)"; "$PY" benches/independent/check_poll_server.py
"""
from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
import time
from typing import Any

import aiohttp

HERE = os.path.dirname(os.path.abspath(__file__))
TG_TOKEN, WX_TOKEN = "7000000001:check-telegram-token", "check-weixin-token"
WX_HOLD_MS = 1500
failures: list[str] = []


def check(ok: bool, name: str, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


class Client:
    def __init__(self, http: aiohttp.ClientSession, base: str) -> None:
        self.http, self.base, self.tg_token, self.wx_token = http, base, TG_TOKEN, WX_TOKEN

    async def call(self, method: str, path: str, timeout: float = 10, **kw: Any) -> tuple[int, Any]:
        async with self.http.request(method, self.base + path, timeout=aiohttp.ClientTimeout(total=timeout),
                                     **kw) as r:
            body = await r.read()
            try:
                return r.status, await r.json(content_type=None)
            except ValueError:
                return r.status, body.decode(errors="replace")

    async def tg(self, method: str, timeout: float = 10, token: str | None = None, **kw: Any) -> tuple[int, Any]:
        return await self.call("POST", f"/bot{token or self.tg_token}/{method}", timeout, **kw)

    async def wx(self, endpoint: str, body: dict[str, Any], timeout: float = 10, headers: dict[str, str] | None = None,
                 token: str | None = None) -> tuple[int, Any]:
        uin = base64.b64encode(str(int.from_bytes(os.urandom(4), "big")).encode()).decode()
        h = {"AuthorizationType": "ilink_bot_token", "Authorization": f"Bearer {token or self.wx_token}",
             "X-WECHAT-UIN": uin} if headers is None else headers
        body = {**body, "base_info": {"channel_version": "check"}}
        return await self.call("POST", f"/ilink/bot/{endpoint}", timeout, json=body, headers=h)

    async def control(self, path: str, json: Any = None) -> Any:
        status, body = await self.call("POST", f"/_control/{path}", json=json)
        assert status == 200, (path, status, body)
        return body

    async def fault(self, platform: str, **spec: Any) -> Any:
        return await self.control(f"{platform}/fault", json=spec)


async def times_out(coro: Any) -> bool:
    try:
        await coro
    except asyncio.TimeoutError:
        return True
    return False


async def telegram(c: Client) -> None:
    st, b = await c.call("GET", f"/bot{TG_TOKEN}/getMe")
    check(st == 200 and b["result"]["is_bot"] is True and b["result"]["id"] == 7000000001, "tg getMe (GET)", b)
    st, b = await c.tg("getme", token="0bad")
    check(st == 401 and b["description"] == "Unauthorized: invalid token specified", "tg malformed token", b)
    st, b = await c.tg("getMe", token="7000000001:wrong")
    check(st == 401 and b == {"ok": False, "error_code": 401, "description": "Unauthorized"}, "tg wrong token", b)
    st, b = await c.tg("noSuchMethod")
    check(st == 404 and b["description"] == "Not Found: method not found", "tg unknown method", b)

    st, b = await c.tg("getUpdates", params={"timeout": "0", "offset": "1"})  # not 0: see the same-offset rule
    check(st == 200 and b == {"ok": True, "result": []}, "tg empty short poll", b)
    ids = [u["update_id"] for u in (await c.control("telegram/emit?n=3&chats=2"))["updates"]]
    st, b = await c.tg("getUpdates", json={"timeout": 0, "limit": 2})
    got = [u["update_id"] for u in b["result"]]
    check(got == ids[:2] and b["result"][0]["message"]["chat"]["type"] == "private", "tg limit", b)
    st, b = await c.tg("getUpdates", data={"offset": str(ids[1] + 1)})
    check([u["update_id"] for u in b["result"]] == ids[2:], "tg offset confirms (form body)", b)
    nxt = ids[2] + 1
    st, b = await c.tg("getUpdates", json={"offset": nxt})
    st2, info = await c.tg("getWebhookInfo")
    check(b["result"] == [] and info["result"]["pending_update_count"] == 0 and info["result"]["url"] == "",
          "tg confirmed updates are gone", info)

    poll = asyncio.create_task(c.tg("getUpdates", json={"offset": nxt, "timeout": 5}))
    await asyncio.sleep(0.3)
    t0 = time.monotonic()
    new = (await c.control("telegram/emit?n=1"))["updates"][0]
    st, b = await poll
    check(st == 200 and [u["update_id"] for u in b["result"]] == [new["update_id"]] and time.monotonic() - t0 < 1,
          "tg long poll woken by an update", b)
    nxt = new["update_id"] + 1

    first = asyncio.create_task(c.tg("getUpdates", json={"offset": nxt, "timeout": 5}))
    await asyncio.sleep(0.3)
    second = asyncio.create_task(c.tg("getUpdates", json={"offset": nxt, "timeout": 5}))
    st, b = await first
    check(st == 409 and b["description"].startswith("Conflict: terminated by other getUpdates request; make sure"),
          "tg newer getUpdates terminates the older", b)
    await c.control("telegram/emit?n=1&text=release")
    st, b = await second
    check(st == 200 and b["result"][0]["message"]["text"] == "release", "tg the newer poll survives", b)
    nxt = b["result"][0]["update_id"] + 1

    await c.tg("getUpdates", json={"offset": nxt, "allowed_updates": ["callback_query"]})
    e1 = await c.control("telegram/emit?n=1")
    await c.tg("getUpdates", json={"offset": nxt + 1})  # no allowed_updates: the filter persists
    e2 = await c.control("telegram/emit?n=1")
    await c.tg("getUpdates", json={"offset": nxt + 2, "allowed_updates": []})  # empty list: the default again
    e3 = await c.control("telegram/emit?n=1")
    check(e1["dropped"] == 1 and e2["dropped"] == 1 and e3["dropped"] == 0, "tg allowed_updates persists",
          (e1, e2, e3))
    st, b = await c.tg("getUpdates", json={"offset": 0})
    check([u["update_id"] for u in b["result"]] == [e3["updates"][0]["update_id"]], "tg offset 0 = first pending", b)
    nxt = e3["updates"][0]["update_id"] + 1

    st, b = await c.tg("sendMessage", data={"chat_id": str(e3["updates"][0]["chat_id"]), "text": "hello",
                                            "reply_parameters": '{"message_id": %d}' % e3["updates"][0]["message_id"]})
    check(st == 200 and b["result"]["text"] == "hello" and "reply_to_message" in b["result"], "tg sendMessage", b)
    st, b = await c.tg("sendMessage", json={"chat_id": e3["updates"][0]["chat_id"], "text": "<b>x</b>",
                                            "parse_mode": "HTML", "reply_to_message_id": 999999})
    check(st == 400 and b["description"] == "Bad Request: message to be replied not found", "tg reply missing", b)
    for payload, want in (({"chat_id": 1, "text": "x"}, "Bad Request: chat not found"),
                          ({"text": "x"}, "Bad Request: chat_id is empty"),
                          ({"chat_id": e3["updates"][0]["chat_id"], "text": " "}, "Bad Request: message text is empty"),
                          ({"chat_id": e3["updates"][0]["chat_id"], "text": "x" * 4097},
                           "Bad Request: message is too long"),
                          ({"chat_id": e3["updates"][0]["chat_id"], "text": "x", "parse_mode": "Plain"},
                           "Bad Request: unsupported parse_mode")):
        st, b = await c.tg("sendMessage", json=payload)
        check(st == 400 and b["description"] == want, f"tg sendMessage refused: {want}", b)
    await asyncio.sleep(3.1)  # let the 409 pacing window pass

    st, b = await c.tg("setWebhook", json={"url": "http://example.com/hook"})
    check(st == 400 and "An HTTPS URL must be provided" in b["description"], "tg setWebhook needs https", b)
    await asyncio.sleep(1.1)  # setWebhook with a URL is allowed once a second, refused or not
    held = asyncio.create_task(c.tg("getUpdates", json={"offset": nxt, "timeout": 5}))
    await asyncio.sleep(0.2)
    st, b = await c.tg("setWebhook", json={"url": "https://example.com/hook"})
    check(st == 200 and b["description"] == "Webhook was set", "tg setWebhook", b)
    st, b = await held
    check(st == 409 and b["description"] == "Conflict: terminated by setWebhook request", "tg setWebhook aborts poll", b)
    t0 = time.monotonic()
    st, b = await c.tg("getUpdates")
    check(st == 409 and "while webhook is active" in b["description"] and time.monotonic() - t0 > 2.5,
          "tg getUpdates with a webhook (paced 409)", b)
    st, b = await c.tg("getWebhookInfo")
    check(b["result"]["url"] == "https://example.com/hook", "tg getWebhookInfo", b)
    st, b = await c.tg("deleteWebhook", params={"drop_pending_updates": "true"})
    st2, b2 = await c.tg("deleteWebhook")
    check(b["description"] == "Webhook was deleted" and b2["description"] == "Webhook is already deleted",
          "tg deleteWebhook", (b, b2))
    await asyncio.sleep(3.1)

    await c.fault("telegram", kind="hang")
    check(await times_out(c.tg("getUpdates", timeout=1, json={"offset": nxt})), "tg fault hang")
    await c.fault("telegram", kind="conflict", count=1)
    st, b = await c.tg("getUpdates", json={"offset": nxt})
    st2, b2 = await c.tg("getUpdates", json={"offset": nxt})
    check(st == 409 and "terminated by other getUpdates" in b["description"] and st2 == 200, "tg fault conflict",
          (b, b2))
    await c.fault("telegram", kind="rate_limit", retry_after=7, count=1)
    st, b = await c.tg("sendMessage", json={"chat_id": e3["updates"][0]["chat_id"], "text": "x"})
    check(st == 429 and b["parameters"] == {"retry_after": 7} and b["description"].endswith("retry after 7"),
          "tg fault rate_limit", b)
    await c.fault("telegram", kind="server_error", status=502, count=1)
    st, b = await c.tg("getMe")
    check(st == 502 and "502 Bad Gateway" in b, "tg fault server_error", b)
    await c.fault("telegram", kind="duplicate", count=1)
    dup = [u["update_id"] for u in (await c.control("telegram/emit?n=2"))["updates"]]
    await asyncio.sleep(0.6)  # the same offset again within 0.5 s would get limit=1
    _, b1 = await c.tg("getUpdates", json={"offset": nxt})
    _, b2 = await c.tg("getUpdates", json={"offset": dup[-1] + 1})
    _, b3 = await c.tg("getUpdates", json={"offset": dup[-1] + 1, "timeout": 0})
    check([u["update_id"] for u in b1["result"]] == dup == [u["update_id"] for u in b2["result"]]
          and b3["result"] == [], "tg fault duplicate", (b1, b2, b3))
    await c.fault("telegram", kind="cursor_reset", update_id=42)
    e = await c.control("telegram/emit?n=1")
    _, b = await c.tg("getUpdates", json={"offset": dup[-1] + 1})
    check(e["updates"][0]["update_id"] == 42 and [u["update_id"] for u in b["result"]] == [42],
          "tg fault cursor_reset (offset ahead reads from the head)", b)
    await c.fault("telegram", kind="expire_session")
    st, b = await c.tg("getMe")
    check(st == 401 and b["description"] == "Unauthorized", "tg fault expire_session", b)
    c.tg_token = (await c.control("telegram/token"))["token"]
    st, b = await c.tg("getMe")
    check(st == 200, "tg renewed token", b)
    st, b = await c.call("POST", "/_control/telegram/fault", json={"kind": "none"})
    check(st == 200 and b["fault"] is None, "tg fault none", b)


async def weixin(c: Client) -> None:
    st, b = await c.wx("getupdates", {"get_updates_buf": ""}, headers={})
    check(st == 200 and b == {"errcode": -14, "errmsg": "session timeout"}, "wx missing headers -> -14", b)
    st, b = await c.wx("getupdates", {"get_updates_buf": ""}, token="nope")
    check(b.get("errcode") == -14, "wx wrong token -> -14", b)
    t0 = time.monotonic()
    st, b = await c.wx("getupdates", {"get_updates_buf": ""})
    held = time.monotonic() - t0
    check(st == 200 and b["ret"] == 0 and b["msgs"] == [] and b["longpolling_timeout_ms"] == WX_HOLD_MS
          and b["get_updates_buf"] and WX_HOLD_MS / 1000 - 0.2 < held < WX_HOLD_MS / 1000 + 1, "wx empty hold", b)
    buf = b["get_updates_buf"]
    sent = (await c.control("weixin/emit?n=2&users=2"))["messages"]
    st, b = await c.wx("getupdates", {"get_updates_buf": buf})
    msgs = b["msgs"]
    check([m["message_id"] for m in msgs] == [m["message_id"] for m in sent] and msgs[0]["message_id"] > 2 ** 53
          and msgs[0]["message_type"] == 1 and msgs[0]["item_list"][0]["text_item"]["text"] and msgs[0]["context_token"],
          "wx getupdates delivers", b)
    buf = b["get_updates_buf"]
    poll = asyncio.create_task(c.wx("getupdates", {"get_updates_buf": buf}))
    await asyncio.sleep(0.3)
    t0 = time.monotonic()
    one = (await c.control("weixin/emit?n=1"))["messages"][0]
    st, b = await poll
    check([m["message_id"] for m in b["msgs"]] == [one["message_id"]] and time.monotonic() - t0 < 0.5,
          "wx held poll woken by a message", b)
    buf = b["get_updates_buf"]
    st, b2 = await c.wx("getupdates", {"get_updates_buf": ""}, timeout=5)
    check([x["message_id"] for x in b2["msgs"]] == [one["message_id"]], "wx empty cursor reads from the last confirmed",
          b2)

    m = msgs[0]
    out = {"msg": {"from_user_id": "", "to_user_id": m["from_user_id"], "client_id": "check-1", "message_type": 2,
                   "message_state": 2, "context_token": m["context_token"],
                   "item_list": [{"type": 1, "text_item": {"text": "pong"}}]}}
    st, b = await c.wx("sendmessage", out)
    st2, b2 = await c.wx("sendmessage", out)
    posts = [p for p in (await c.call("GET", "/_posts"))[1]["posts"] if p["platform"] == "weixin"]
    check(b == b2 == {"ret": 0, "errmsg": ""} and len(posts) == 1 and posts[0]["context_known"] is True
          and posts[0]["text"] == "pong", "wx sendmessage + client_id dedupe", posts)
    st, b = await c.wx("getconfig", {"ilink_user_id": m["from_user_id"]})
    st2, b2 = await c.wx("msg/notifystart", {})
    check(b["ret"] == 0 and b["typing_ticket"] and b2 == {"ret": 0, "errmsg": ""}, "wx getconfig/notifystart", (b, b2))

    await c.fault("weixin", kind="hang")
    check(await times_out(c.wx("getupdates", {"get_updates_buf": buf}, timeout=1)), "wx fault hang")
    await c.fault("weixin", kind="rate_limit", count=1)
    st, b = await c.wx("sendmessage", {**out, "msg": {**out["msg"], "client_id": "check-2"}})
    check(b == {"ret": -2, "errmsg": "prepare failed"}, "wx fault rate_limit", b)
    await c.fault("weixin", kind="server_error", count=1)
    st, b = await c.wx("getupdates", {"get_updates_buf": buf})
    check(st == 500, "wx fault server_error", b)
    await c.fault("weixin", kind="duplicate", count=1)
    sent = (await c.control("weixin/emit?n=1"))["messages"]
    _, b1 = await c.wx("getupdates", {"get_updates_buf": buf})
    _, b2 = await c.wx("getupdates", {"get_updates_buf": b1["get_updates_buf"]})
    check(b1["msgs"] == b2["msgs"] and [x["message_id"] for x in b1["msgs"]] == [sent[0]["message_id"]],
          "wx fault duplicate", (b1, b2))
    buf = b2["get_updates_buf"]
    await c.fault("weixin", kind="cursor_reset")
    _, b = await c.wx("getupdates", {"get_updates_buf": buf})
    check([x["seq"] for x in b["msgs"]] == [1, 2, 3, 4], "wx fault cursor_reset redelivers", b)
    buf = b["get_updates_buf"]
    held_poll = asyncio.create_task(c.wx("getupdates", {"get_updates_buf": buf}))
    await asyncio.sleep(0.3)
    await c.fault("weixin", kind="expire_session")
    t0 = time.monotonic()
    _, b = await held_poll
    _, b2 = await c.wx("sendmessage", out)
    check(b.get("errcode") == -14 and b2.get("errcode") == -14 and time.monotonic() - t0 < 0.5,
          "wx fault expire_session (held poll answered)", (b, b2))
    c.wx_token = (await c.control("weixin/token"))["token"]
    _, b = await c.wx("getupdates", {"get_updates_buf": buf}, timeout=5)
    check(b.get("ret") == 0 and "errcode" not in b, "wx renewed token", b)
    st, b = await c.call("POST", "/_control/weixin/fault", json={"kind": "conflict"})
    check(st == 400, "wx has no conflict fault", b)
    st, b = await c.call("POST", "/_control/weixin/fault", json={"kind": "none"})
    check(st == 200 and b["fault"] is None, "wx fault none", b)


async def run(base: str) -> None:
    async with aiohttp.ClientSession() as http:
        c = Client(http, base)
        await asyncio.gather(telegram(c), weixin(c))
        st, ups = await c.call("GET", "/_updates")
        check(st == 200 and any(r["deliveries"] == 2 for r in ups["telegram"])
              and any(r["dropped"] for r in ups["telegram"]) and len(ups["weixin"]) == 4
              and all(r["first_delivered_ms"] is not None for r in ups["weixin"]), "records /_updates", ups)
        st, posts = await c.call("GET", "/_posts")
        check(st == 200 and sum(p["platform"] == "telegram" for p in posts["posts"]) == 1
              and len(posts["attempts"]) > len(posts["posts"]), "records /_posts", posts)
        st, stats = await c.call("GET", "/_independent/stats")
        check(st == 200 and stats["telegram_409"] >= 4, "stats", stats)


async def main() -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, os.path.join(HERE, "poll_server.py"), "--port", "0", "--telegram-token", TG_TOKEN,
        "--weixin-token", WX_TOKEN, "--weixin-poll-timeout-ms", str(WX_HOLD_MS), stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode().strip()
    check(line.startswith("listening http://127.0.0.1:"), "startup line", line)
    try:
        await asyncio.wait_for(run(line.split(" ", 1)[1]), 120)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 10)
        check(code == 0, "SIGTERM exits 0", code)
    print(f"{len(failures)} failure(s)" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
