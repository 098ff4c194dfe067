#!/usr/bin/env python3
"""Self-check for slack_server.py: starts it on port 0 (twice, with different flags), exercises every
route, every fault and the redelivery rules over real HTTP and WebSocket, and exits non-zero on any
mismatch.

    PY="$(scripts/bench-deps | tail -1)"; "$PY" benches/independent/check_slack_server.py
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit

import aiohttp

HERE = os.path.dirname(os.path.abspath(__file__))
APP, BOT = "xapp-1-ACHECK-1-check", "xoxb-check"
ACK_MS, RETRIES, PING_MS, GRACE_MS = 400, 2, 300, 300
failures: list[str] = []


def check(ok: bool, name: str, detail: Any = "") -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {str(detail)[:600]}"), flush=True)
    if not ok:
        failures.append(name)


class Sock:
    """A client socket that records pings/pongs and hands out JSON text frames."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws, self.pings, self.pongs, self.close_code = ws, 0, 0, None

    async def frame(self, timeout: float = 2.0) -> dict[str, Any] | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := deadline - loop.time()) > 0:
            try:
                msg = await self.ws.receive(timeout=left)
            except asyncio.TimeoutError:
                return None
            if msg.type == aiohttp.WSMsgType.PING:
                self.pings += 1
            elif msg.type == aiohttp.WSMsgType.PONG:
                self.pongs += 1
            elif msg.type == aiohttp.WSMsgType.TEXT:
                return json.loads(msg.data)
            else:
                if msg.type == aiohttp.WSMsgType.CLOSE:
                    self.close_code = msg.data
                return None
        return None

    async def frames(self, seconds: float) -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        out, deadline = [], loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            f = await self.frame(left)
            if f is None:
                if self.ws.closed:
                    await asyncio.sleep(max(0.0, deadline - loop.time()))
                continue
            out.append(f)
        return out

    async def ack(self, frame: dict[str, Any], payload: Any = None) -> None:
        body = {"envelope_id": frame["envelope_id"]}
        if payload is not None:
            body["payload"] = payload
        await self.ws.send_str(json.dumps(body))

    async def ack_all(self, seconds: float) -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        out, deadline = [], loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            f = await self.frame(left)
            if f is not None and f.get("type") == "events_api":
                await self.ack(f)
                out.append(f)
        return out


class Client:
    def __init__(self, http: aiohttp.ClientSession, base: str, app_token: str = APP) -> None:
        self.http, self.base, self.app_token = http, base, app_token

    async def api(self, method: str, token: str | None = None, **kw: Any) -> tuple[int, Any, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with self.http.post(f"{self.base}/api/{method}", headers=headers, **kw) as r:
            return r.status, await r.json(content_type=None), r.headers

    async def control(self, name: str, **body: Any) -> Any:
        async with self.http.post(f"{self.base}/_control/{name}", json=body) as r:
            out = await r.json()
            assert r.status == 200 and out["ok"], (name, r.status, out)
            return out

    async def get(self, path: str) -> Any:
        async with self.http.get(self.base + path) as r:
            return await r.json()

    async def stats(self) -> dict[str, Any]:
        return await self.get("/_independent/stats")

    async def open_url(self) -> str:
        _, b, _ = await self.api("apps.connections.open", self.app_token)
        assert b["ok"], b
        return b["url"]

    def local(self, url: str) -> str:
        """The URL as reachable here (a --public-ws URL keeps only its path and query)."""
        parts = urlsplit(url)
        return "ws" + self.base[4:] + parts.path + "?" + parts.query

    async def connect(self, url: str | None = None, suffix: str = "") -> tuple[Sock, dict[str, Any] | None]:
        ws = await self.http.ws_connect(self.local(url or await self.open_url()) + suffix, autoping=False)
        sock = Sock(ws)
        return sock, await sock.frame()

    async def wait(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 3.0) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            s = await self.stats()
            if pred(s) or loop.time() > deadline:
                return s
            await asyncio.sleep(0.05)


async def refused(coro: Awaitable[Any]) -> int | None:
    try:
        ws = await coro
        await ws.close()
        return None
    except aiohttp.WSServerHandshakeError as exc:
        return exc.status


async def web_api(c: Client, port: int) -> None:
    st, b, _ = await c.api("apps.connections.open")
    check(b == {"ok": False, "error": "not_authed"}, "open without a token -> not_authed", b)
    _, b, _ = await c.api("apps.connections.open", BOT)
    check(b == {"ok": False, "error": "not_allowed_token_type"}, "open with the bot token -> not_allowed_token_type", b)
    _, b, _ = await c.api("apps.connections.open", "xapp-1-other")
    check(b == {"ok": False, "error": "invalid_auth"}, "open with another token -> invalid_auth", b)
    st, b, h = await c.api("apps.connections.open", APP)
    check(st == 200 and b["ok"] and b["url"].startswith(f"ws://127.0.0.1:{port}/link/?ticket=") and "&app_id=" in b["url"]
          and h.get("x-oauth-scopes") == "connections:write", "open -> one-shot ws URL", (b, dict(h)))
    _, b, _ = await c.api("auth.test", BOT)
    check(b["ok"] and b["user_id"] == "U0CHECKBOT" and b["bot_id"] == "B0CHECKBOT" and b["team_id"] == "T0INDEP",
          "auth.test with the bot token", b)
    _, b, _ = await c.api("auth.test", APP)
    _, b2, _ = await c.api("auth.test")
    check(b["error"] == "not_allowed_token_type" and b2["error"] == "not_authed", "auth.test refusals", (b, b2))
    _, b, _ = await c.api("no.such.method", BOT)
    check(b["error"] == "unknown_method", "unknown method", b)


async def sockets(c: Client) -> None:
    url = await c.open_url()
    s1, hello = await c.connect(url)
    check(hello is not None and hello["type"] == "hello" and hello["num_connections"] == 1
          and hello["connection_info"] == {"app_id": "A0INDEP"} and hello["debug_info"]["build_number"] == 10
          and hello["debug_info"]["approximate_connection_time"] == 18060 and hello["debug_info"]["host"],
          "hello first", hello)
    check(await refused(c.http.ws_connect(c.local(url))) == 401, "a used ticket is refused (401)")
    check(await refused(c.http.ws_connect(c.base.replace("http", "ws") + "/link/?ticket=nope")) == 401,
          "an unknown ticket is refused (401)")
    dbg, hello = await c.connect(suffix="&debug_reconnects=true")
    check(hello is not None and hello["debug_info"]["approximate_connection_time"] == 360
          and hello["num_connections"] == 2, "debug_reconnects=true -> 360", hello)
    await dbg.ws.close()
    s = await c.wait(lambda s: s["live_connections"] == 1)
    check(s["live_connections"] == 1 and s["client_closes"] >= 1, "client close counted", s)

    ids = (await c.control("emit", channel="C0OTHER", text="hello", thread_ts="1700000000.000100"))["event_ids"]
    f = await s1.frame()
    p = (f or {}).get("payload", {})
    e = p.get("event", {})
    check(f is not None and f["type"] == "events_api" and f["retry_attempt"] == 0 and f["retry_reason"] == ""
          and f["accepts_response_payload"] is False and isinstance(f["envelope_id"], str)
          and p["type"] == "event_callback" and p["event_id"] == ids[0] and p["team_id"] == "T0INDEP"
          and p["api_app_id"] == "A0INDEP" and isinstance(p["event_time"], int)
          and e["type"] == "message" and e["channel"] == "C0OTHER" and e["user"] and e["text"] == "hello"
          and e["ts"] == e["event_ts"] and e["thread_ts"] == "1700000000.000100" and "bot_id" not in e,
          "events_api envelope", f)
    await s1.ack(f)
    later = await s1.frames(ACK_MS * 2 / 1000)
    s = await c.stats()
    check(later == [] and s["acks"] == 1 and s["events_acked"] == 1 and s["redeliveries"] == 0,
          "ack without payload settles the event", (later, s))
    await c.control("emit")
    f = await s1.frame()
    await s1.ack(f, payload={})
    s = await c.wait(lambda s: s["acks_with_payload"] == 1)
    check(s["acks_with_payload"] == 1 and s["events_acked"] == 2, "ack with payload {}", s)

    ids = (await c.control("emit"))["event_ids"]
    got = await s1.frames(ACK_MS * (RETRIES + 1) / 1000 + 0.5)
    s = await c.stats()
    check([g["retry_attempt"] for g in got] == [0, 1, 2] and [g["retry_reason"] for g in got] == ["", "timeout", "timeout"]
          and len({g["envelope_id"] for g in got}) == 3 and {g["payload"]["event_id"] for g in got} == set(ids)
          and s["given_up"] == 1 and s["redeliveries"] == 2, "unacked: redelivered with new envelope_id, then given up",
          (got, s))
    await s1.ack(got[0])
    await s1.ws.send_str(json.dumps({"envelope_id": str(uuid.uuid4())}))
    await s1.ws.send_str("not json")
    s = await c.wait(lambda s: s["bad_frames"] == 1)
    check(s["late_acks"] == 1 and s["stray_acks"] == 1 and s["bad_frames"] == 1, "late, stray and bad acks counted", s)
    await c.control("emit")
    first = await s1.frame()
    second = await s1.frame()
    await s1.ack(second)
    later = await s1.frames(ACK_MS * 2 / 1000)
    check(second is not None and second["retry_attempt"] == 1 and later == [], "acking the retry stops redelivery", later)

    await s1.ws.ping(b"client-ping")
    await s1.frames(0.5)
    await s1.ws.pong(b"answer")
    s = await c.wait(lambda s: s["ws_pongs"] >= 1)
    check(s1.pongs >= 1 and s["ws_pings"] >= 1, "client ping answered with pong", (s1.pongs, s))
    check(s1.pings >= 1 and s["server_pings"] >= 1 and s["ws_pongs"] >= 1, "server pings sent, pongs counted", s)

    s2, hello = await c.connect()
    check(hello is not None and hello["num_connections"] == 2, "second connection", hello)
    await c.control("emit", count=4)
    a, b = await asyncio.gather(s1.ack_all(0.6), s2.ack_all(0.6))
    check(len(a) == 2 and len(b) == 2, "round robin over two sockets", (len(a), len(b)))

    await posts(c, s1, s2)
    await limit(c)
    await open_faults(c)
    await socket_faults(c, s1, s2)


async def posts(c: Client, s1: Sock, s2: Sock) -> None:
    st, b, _ = await c.api("chat.postMessage", BOT, json={"channel": "C0INDEP", "text": "reply",
                                                          "thread_ts": "1700000000.000100"})
    m = b.get("message", {})
    check(st == 200 and b["ok"] and b["channel"] == "C0INDEP" and b["ts"] and m["bot_id"] == "B0CHECKBOT"
          and m["user"] == "U0CHECKBOT" and m["text"] == "reply" and m["thread_ts"] == "1700000000.000100",
          "chat.postMessage", b)
    a, b2 = await asyncio.gather(s1.ack_all(0.5), s2.ack_all(0.5))
    echo = [f["payload"]["event"] for f in a + b2]
    check(len(echo) == 1 and echo[0]["user"] == "U0CHECKBOT" and echo[0]["bot_id"] == "B0CHECKBOT"
          and echo[0]["ts"] == b["ts"] and echo[0]["thread_ts"] == "1700000000.000100" and echo[0]["text"] == "reply",
          "post echoed as a bot event", echo)
    _, b, _ = await c.api("chat.postMessage", BOT, data={"channel": "C0OTHER", "text": "form"})
    check(b["ok"] and "thread_ts" not in b["message"], "chat.postMessage form body", b)
    for kw, token, want in (({"json": {"channel": "C0NOPE", "text": "x"}}, BOT, "channel_not_found"),
                            ({"json": {"channel": "C0INDEP", "text": ""}}, BOT, "no_text"),
                            ({"json": {"channel": "C0INDEP", "text": "x"}}, APP, "not_allowed_token_type"),
                            ({"json": {"channel": "C0INDEP", "text": "x"}}, None, "not_authed")):
        st, b, _ = await c.api("chat.postMessage", token, **kw)
        check(st == 200 and b == {"ok": False, "error": want}, f"chat.postMessage -> {want}", b)
    base = len((await c.get("/_posts"))["posts"])
    await c.control("post_fault", kind="429", retry_after=7)
    st, b, h = await c.api("chat.postMessage", BOT, json={"channel": "C0INDEP", "text": "limited"})
    st2, b2, _ = await c.api("chat.postMessage", BOT, json={"channel": "C0INDEP", "text": "after"})
    check(st == 429 and h.get("Retry-After") == "7" and b == {"ok": False, "error": "ratelimited"} and b2["ok"],
          "post_fault 429 (count 1)", (st, b, b2))
    await c.control("post_fault", kind="500")
    st, b, _ = await c.api("chat.postMessage", BOT, json={"channel": "C0INDEP", "text": "lost"})
    check(st == 200 and b == {"ok": False, "error": "internal_error"}, "post_fault 500 -> HTTP 200 internal_error", b)
    await c.control("post_fault", kind="500", commit=True)
    _, b, _ = await c.api("chat.postMessage", BOT, json={"channel": "C0INDEP", "text": "committed"})
    await c.control("post_fault", kind="reset_after")
    try:
        st, b2, _ = await c.api("chat.postMessage", BOT, json={"channel": "C0INDEP", "text": "dropped"})
        dropped = False
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
        dropped = True
    texts = [p["text"] for p in (await c.get("/_posts"))["posts"][base:]]
    check(b["error"] == "internal_error" and dropped and texts == ["after", "committed", "dropped"],
          "internal_error after commit; reset_after records then drops", (b, dropped, texts))
    await asyncio.gather(s1.ack_all(0.5), s2.ack_all(0.5))


async def limit(c: Client) -> None:
    extra = []
    for i in range(8):
        sock, hello = await c.connect()
        extra.append(sock)
        if i == 7:
            check(hello is not None and hello["num_connections"] == 10, "ten connections", hello)
    sock, first = await c.connect()
    nxt = await sock.frame()
    check(first is not None and first["type"] == "disconnect" and first["reason"] == "too_many_websockets"
          and nxt is None and sock.close_code == 1000, "11th socket: disconnect too_many_websockets, close 1000",
          (first, sock.close_code))
    for sock in extra:
        await sock.ws.close()
    s = await c.wait(lambda s: s["live_connections"] == 2)
    check(s["live_connections"] == 2 and s["too_many_websockets"] == 1, "extra sockets closed", s)


async def open_faults(c: Client) -> None:
    await c.control("refuse_open", error="socket_mode_not_enabled", count=1)
    _, b, _ = await c.api("apps.connections.open", APP)
    _, b2, _ = await c.api("apps.connections.open", APP)
    check(b == {"ok": False, "error": "socket_mode_not_enabled"} and b2["ok"], "refuse_open error (count 1)", (b, b2))
    await c.control("refuse_open", retry_after=3)
    st, b, h = await c.api("apps.connections.open", APP)
    check(st == 429 and h.get("Retry-After") == "3" and b == {"ok": False, "error": "ratelimited"},
          "refuse_open retry_after -> 429", (st, b))
    await c.control("clear")
    await c.control("revoke")
    r = [(await c.api(m, t, json={"channel": "C0INDEP", "text": "x"}))[1].get("error")
         for m, t in (("apps.connections.open", APP), ("auth.test", BOT), ("chat.postMessage", BOT))]
    check(r == ["token_revoked"] * 3, "revoke -> token_revoked", r)
    await c.control("clear")
    _, b, _ = await c.api("apps.connections.open", APP)
    check(b["ok"], "clear restores", b)


async def socket_faults(c: Client, s1: Sock, s2: Sock) -> None:
    await c.control("fault", kind="deaf")
    await s1.ws.ping(b"deaf?")
    pongs = s1.pongs
    await c.control("emit")

    async def ack_everything(sock: Sock) -> list[dict[str, Any]]:
        got = [f for f in await sock.frames(ACK_MS * 1.6 / 1000) if f.get("type") == "events_api"]
        for f in got:
            await sock.ack(f)
        return got

    a, b = await asyncio.gather(ack_everything(s1), ack_everything(s2))
    pings_before = s1.pings
    s = await c.stats()
    check(len(a + b) >= 2 and s1.pongs == pongs and s["pings_unanswered"] >= 1 and s["frames_ignored"] >= 1,
          "deaf: events still sent, acks and pings ignored", (a + b, s))
    await c.control("clear")
    a, b = await asyncio.gather(s1.ack_all(ACK_MS * 2 / 1000), s2.ack_all(ACK_MS * 2 / 1000))
    s = await c.wait(lambda s: s["in_flight"] == 0)
    check(s["in_flight"] == 0 and len(a + b) >= 1 and s1.pings > pings_before, "clear: the socket reads again", s)

    await c.control("fault", kind="silence")
    pings, pongs = s1.pings, s1.pongs
    await s1.ws.ping(b"silent?")
    await c.control("emit")
    a, b = await asyncio.gather(s1.frames(0.8), s2.frames(0.8))
    s = await c.stats()
    check(a == b == [] and s1.pings == pings and s1.pongs == pongs and not s1.ws.closed and s["frames_withheld"] >= 1
          and s["silenced"] == 2, "silence: nothing written, no pongs, TCP open", (a, b, s))
    await c.control("clear")

    await c.control("fault", kind="close")
    await asyncio.gather(s1.frames(0.6), s2.frames(0.6))
    s = await c.wait(lambda s: s["live_connections"] == 0)
    check(s1.close_code == 1000 and s2.close_code == 1000 and s["live_connections"] == 0,
          "fault close -> 1000", (s1.close_code, s2.close_code))

    ids = (await c.control("emit", count=2))["event_ids"]
    s = await c.stats()
    s3, hello = await c.connect()
    got = await s3.ack_all(0.5)
    check(s["waiting"] >= 2 and hello is not None and hello["type"] == "hello"
          and set(ids) <= {f["payload"]["event_id"] for f in got}, "events wait for the next connection", (s, got))

    await c.control("fault", kind="disconnect", reason="warning")
    f = await s3.frame()
    more = await s3.frames(GRACE_MS * 2 / 1000)
    check(f is not None and f["type"] == "disconnect" and f["reason"] == "warning" and f["debug_info"]["host"]
          and more == [] and not s3.ws.closed, "disconnect warning (socket stays open)", (f, more))
    await c.control("fault", kind="disconnect", reason="refresh_requested")
    f = await s3.frame()
    nxt = await s3.frame()
    check(f is not None and f["reason"] == "refresh_requested" and nxt is None and s3.close_code == 1000,
          "disconnect refresh_requested, then close 1000 after the grace", (f, s3.close_code))

    s4, _ = await c.connect()
    await c.control("fault", kind="disconnect", reason="link_disabled", close_after_ms=0)
    f = await s4.frame()
    nxt = await s4.frame()
    s5, first = await c.connect()
    nxt5 = await s5.frame()
    check(f is not None and f["reason"] == "link_disabled" and nxt is None and s4.close_code == 1000
          and first is not None and first["type"] == "disconnect" and first["reason"] == "link_disabled"
          and nxt5 is None, "link_disabled: now and for later connections", (f, first))
    await c.control("clear")
    s6, hello = await c.connect()
    check(hello is not None and hello["type"] == "hello", "clear: hello again", hello)
    await s6.ws.close()


async def records(c: Client) -> None:
    p = await c.get("/_posts")
    check(len(p["posts"]) == 5 and len(p["attempts"]) > 5 and {"channel", "text", "thread_ts", "ts", "received_unix_ms"}
          <= set(p["posts"][0]), "/_posts", p)
    ev = (await c.get("/_independent/events"))["events"]
    check(any(e["state"] == "given_up" for e in ev) and any(e["bot"] for e in ev), "/_independent/events", ev[:3])
    s = await c.stats()
    want = {"urls_issued", "connections", "tickets_refused", "live_connections", "envelopes_sent", "redeliveries",
            "acks", "stray_acks", "given_up", "ws_pings", "disconnects", "events_emitted", "events_acked"}
    check(want <= set(s) and s["tickets_refused"] == 2 and s["disconnects"] >= 4, "stats", s)


async def second_server(http: aiohttp.ClientSession, base: str) -> None:
    c = Client(http, base, "xapp-1-A0INDEP-1-independent")  # the server's default app token
    url = await c.open_url()
    check(url.startswith("wss://10.1.1.1:8443/link/?ticket="), "--public-ws base in the URL", url)
    sock, hello = await c.connect(url)
    check(hello is not None and hello["type"] == "hello", "public-ws URL connects locally", hello)
    await sock.ws.ping(b"x")
    got = await sock.frames(1.5)
    by_event: dict[str, list[dict[str, Any]]] = {}
    for f in got:
        by_event.setdefault(f["payload"]["event_id"], []).append(f)
    retried = [v for v in by_event.values() if len(v) == 2]
    check(len(by_event) >= 6 and retried and all(v[0]["envelope_id"] == v[1]["envelope_id"]
                                                  and [x["retry_attempt"] for x in v] == [0, 1] for v in retried),
          "--dispatch-every-ms + --same-envelope-id", {k: len(v) for k, v in by_event.items()})
    s = await c.stats()
    check(sock.pongs == 0 and s["pings_unanswered"] >= 1, "--no-ws-pong", s)


async def start(*flags: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, os.path.join(HERE, "slack_server.py"), "--port", "0",
                                                *flags, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode().strip()
    check(line.startswith("listening http://127.0.0.1:"), "startup line", line)
    return proc, line.split(" ", 1)[1]


async def stop(proc: asyncio.subprocess.Process, name: str) -> None:
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(proc.wait(), 10)
    check(code == 0, f"{name}: SIGTERM exits 0", code)


async def main() -> int:
    main_proc, base = await start("--app-token", APP, "--bot-token", BOT, "--bot-user-id", "U0CHECKBOT",
                                  "--bot-id", "B0CHECKBOT", "--channels", "C0INDEP,C0OTHER",
                                  "--ack-timeout-ms", str(ACK_MS), "--max-retries", str(RETRIES),
                                  "--server-ping-ms", str(PING_MS), "--disconnect-grace-ms", str(GRACE_MS))
    other_proc, other = await start("--same-envelope-id", "--no-ws-pong", "--public-ws", "wss://10.1.1.1:8443/",
                                    "--dispatch-every-ms", "100", "--ack-timeout-ms", "300", "--max-retries", "1")
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as http:
            c = Client(http, base)

            async def first() -> None:
                await web_api(c, int(base.rsplit(":", 1)[1]))
                await sockets(c)
                await records(c)
                last, hello = await c.connect()
                main_proc.send_signal(signal.SIGTERM)
                await last.frame()
                await stop(main_proc, "main server")
                check(last.close_code == 1001, "shutdown closes live sockets with 1001", last.close_code)

            await asyncio.wait_for(asyncio.gather(first(), second_server(http, other)), 120)
    finally:
        for proc in (main_proc, other_proc):
            if proc.returncode is None:
                await stop(proc, "second server" if proc is other_proc else "main server")
    print(f"{len(failures)} failure(s)" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
