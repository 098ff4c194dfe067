#!/usr/bin/env python3
"""Self-check for matrix_server.py: starts it on port 0 (twice, with different flags), drives every route,
filter, fault and control route over real HTTP, prints one numbered PASS/FAIL line per check and exits
non-zero on any failure.

    PY="$(scripts/bench-deps | tail -1)"; "$PY" benches/independent/check_matrix_server.py
"""
from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from typing import Any
from urllib.parse import quote

import aiohttp

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN, USER, DEVICE = "check-token", "@bot:check.test", "CHECKDEV"
ROOM_A, ROOM_B, ROOM_X = "!a:check.test", "!b:check.test", "!nope:check.test"
C = "/_matrix/client/v3"
MAX_UPLOAD = 2_000_000  # the main server's --max-upload-bytes
MEDIA_PARENT = tempfile.mkdtemp(prefix="check-matrix-media-")  # the main server's --media-dir
failures: list[str] = []
counter = 0


def check(ok: bool, name: str, detail: Any = "") -> None:
    global counter
    counter += 1
    print(f"{counter:3d} {'PASS' if ok else 'FAIL'} {name}" + ("" if ok else f": {str(detail)[:700]}"), flush=True)
    if not ok:
        failures.append(f"{counter} {name}")


def q(room: str) -> str:
    return quote(room, safe="")


class Client:
    def __init__(self, http: aiohttp.ClientSession, base: str, token: str | None = TOKEN) -> None:
        self.http, self.base, self.token = http, base, token

    async def req(self, method: str, path: str, token: Any = "default", ct: float = 15, **kw: Any
                  ) -> tuple[int, Any, Any]:
        token = self.token if token == "default" else token
        headers = kw.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        async with self.http.request(method, self.base + path, headers=headers,
                                     timeout=aiohttp.ClientTimeout(total=ct), **kw) as r:
            text = await r.text()
            try:
                body: Any = json.loads(text)
            except ValueError:
                body = text
            return r.status, body, r.headers

    async def get(self, path: str, **kw: Any) -> tuple[int, Any, Any]:
        return await self.req("GET", path, **kw)

    async def sync(self, ct: float = 15, **params: Any) -> tuple[int, Any, Any]:
        """params are /sync query parameters (timeout is the server-side hold); ct is the client deadline."""
        params = {k: (json.dumps(v) if isinstance(v, dict) else str(v)) for k, v in params.items()}
        return await self.get(f"{C}/sync", params=params, ct=ct)

    async def send(self, room: str, txn: str, content: dict[str, Any], ct: float = 15,
                   etype: str = "m.room.message", **kw: Any) -> tuple[int, Any, Any]:
        return await self.req("PUT", f"{C}/rooms/{q(room)}/send/{etype}/{txn}", json=content, ct=ct, **kw)

    async def messages(self, room: str, **params: Any) -> tuple[int, Any, Any]:
        return await self.get(f"{C}/rooms/{q(room)}/messages", params={k: str(v) for k, v in params.items()})

    async def control(self, name: str, **body: Any) -> Any:
        async with self.http.post(f"{self.base}/_control/{name}", json=body) as r:
            out = await r.json()
            assert r.status == 200 and out.get("ok"), (name, r.status, out)
            return out

    async def page(self, path: str) -> Any:
        async with self.http.get(self.base + path) as r:
            return await r.json()

    async def stats(self) -> dict[str, Any]:
        return await self.page("/_independent/stats")

    async def head(self) -> str:
        """A next_batch at the current head."""
        s, b, _ = await self.sync(filter={"room": {"timeline": {"limit": 1}}})
        return b["next_batch"]

    async def head_before(self, put: dict[str, Any]) -> str:
        """A since token just before the event an answer's next_batch follows (the event is the last one)."""
        m = re.fullmatch(r"s(\d+)(_.*)", put["next_batch"])
        assert m is not None, put
        return f"s{int(m.group(1)) - 1}{m.group(2)}"


async def raw_put_dropped(base: str, path: str, content: dict[str, Any]) -> bool:
    """PUT over a plain socket; True when the server closes it without a single byte of answer."""
    host, port = base.split("//", 1)[1].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    data = json.dumps(content).encode()
    writer.write(f"PUT {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    await writer.drain()
    try:
        got = await asyncio.wait_for(reader.read(), 5)
    except ConnectionError:
        got = b""
    writer.close()
    return got == b""


def timeline(body: dict[str, Any], room: str) -> list[dict[str, Any]]:
    return body.get("rooms", {}).get("join", {}).get(room, {}).get("timeline", {}).get("events", [])


def room_entry(body: dict[str, Any], room: str) -> dict[str, Any]:
    return body.get("rooms", {}).get("join", {}).get(room, {})


async def basics(c: Client) -> None:
    s, b, _ = await c.get("/_matrix/client/versions", token=None)
    check(s == 200 and "v1.1" in b["versions"], "GET /versions without auth", (s, b))
    s, b, _ = await c.get(f"{C}/account/whoami")
    check(s == 200 and b == {"user_id": USER, "device_id": DEVICE, "is_guest": False}, "whoami with Bearer", b)
    s, b, _ = await c.get(f"{C}/account/whoami", token=None, params={"access_token": TOKEN})
    check(s == 200 and b["user_id"] == USER, "whoami with ?access_token=", (s, b))
    s, b, _ = await c.get(f"{C}/account/whoami", token=None)
    check(s == 401 and b["errcode"] == "M_MISSING_TOKEN" and "error" in b, "no token: 401 M_MISSING_TOKEN", (s, b))
    s, b, _ = await c.get(f"{C}/account/whoami", token="wrong")
    check(s == 401 and b == {"errcode": "M_UNKNOWN_TOKEN", "error": "Unrecognised access token",
                             "soft_logout": False}, "wrong token: 401 M_UNKNOWN_TOKEN soft_logout false", (s, b))
    s, b, _ = await c.get(f"{C}/joined_rooms")
    check(s == 200 and b == {"joined_rooms": [ROOM_A, ROOM_B]}, "joined_rooms", b)
    s, b, _ = await c.get(f"{C}/no/such/thing")
    s2, b2, _ = await c.req("DELETE", f"{C}/joined_rooms")
    check(s == 404 and b["errcode"] == "M_UNRECOGNIZED" and s2 == 405 and b2["errcode"] == "M_UNRECOGNIZED",
          "unknown endpoint 404 / wrong method 405, M_UNRECOGNIZED", (s, b, s2, b2))


async def initial_sync(c: Client) -> None:
    await c.control("emit", room=ROOM_B, n=15, text="old b")
    t0 = time.monotonic()
    s, b, h = await c.sync(timeout=30000)
    took = time.monotonic() - t0
    nb = b.get("next_batch", "")
    check(s == 200 and took < 1.0 and h.get("Content-Type", "").startswith("application/json"),
          "initial sync (no since) answers at once despite timeout=30000", (s, took))
    check(re.fullmatch(r"s\d+(_\d+){7}", nb) is not None and not nb[1:].isdigit(),
          "next_batch is a multi-part Synapse-like token", nb)
    check("device_one_time_keys_count" in b and set(b["rooms"]["join"]) == {ROOM_A, ROOM_B}
          and "invite" not in b["rooms"] and "leave" not in b["rooms"], "initial sync: both rooms, empty maps omitted",
          list(b.get("rooms", {})))
    rb = room_entry(b, ROOM_B)
    ev_types = [e["type"] for e in rb["timeline"]["events"]]
    state_types = [e["type"] for e in rb.get("state", {}).get("events", [])]
    check(len(ev_types) == 10 and rb["timeline"]["limited"] is True and rb["timeline"].get("prev_batch")
          and "m.room.encryption" in state_types and "m.room.create" in state_types,
          "initial sync: default limit 10, limited + prev_batch, m.room.encryption in state", (ev_types, state_types))
    ra = room_entry(b, ROOM_A)
    check(ra["timeline"]["limited"] is False and "state" not in ra and "prev_batch" not in ra["timeline"]
          and [e["type"] for e in ra["timeline"]["events"]][0] == "m.room.create",
          "small room: whole history in timeline, not limited, no state, no prev_batch", ra)
    e = rb["timeline"]["events"][-1]
    check({"event_id", "type", "sender", "origin_server_ts", "content"} <= set(e) and "room_id" not in e
          and e["event_id"].startswith("$") and "age" in e["unsigned"], "timeline events: ClientEventWithoutRoomID", e)
    s, b, _ = await c.sync(filter={"room": {"timeline": {"limit": 3}}})
    check(len(timeline(b, ROOM_B)) == 3 and room_entry(b, ROOM_B)["timeline"]["limited"],
          "room.timeline.limit from an inline filter", len(timeline(b, ROOM_B)))


async def long_poll(c: Client) -> None:
    nb = await c.head()
    s, b, _ = await c.sync(since=nb, timeout=0)
    check(s == 200 and b["next_batch"] == nb and "rooms" not in b, "timeout=0, nothing new: next_batch == since",
          b)
    t0 = time.monotonic()
    s, b, _ = await c.sync(since=nb, timeout=700)
    took = time.monotonic() - t0
    check(s == 200 and 0.65 <= took < 2.0 and b["next_batch"] == nb and "rooms" not in b,
          "held until timeout, then empty with next_batch == since", (took, b))

    async def later() -> Any:
        await asyncio.sleep(0.3)
        return await c.control("emit", room=ROOM_A, text="wake up")

    t0 = time.monotonic()
    (s, b, _), emitted = await asyncio.gather(c.sync(since=nb, timeout=3000), later())
    took = time.monotonic() - t0
    tl = timeline(b, ROOM_A)
    check(s == 200 and 0.25 <= took < 1.5 and [e["event_id"] for e in tl] == emitted["event_ids"]
          and b["next_batch"] != nb, "early return on a new event (timeout 3000)", (took, tl))
    nb2 = b["next_batch"]

    async def later2() -> None:
        await asyncio.sleep(0.2)
        await c.control("emit", room=ROOM_A, encrypted=True)
        await asyncio.sleep(0.3)
        await c.control("emit", room=ROOM_A, text="visible")

    t0 = time.monotonic()
    (s, b, _), _ = await asyncio.gather(
        c.sync(since=nb2, timeout=3000, filter={"room": {"timeline": {"types": ["m.room.message"]}}}), later2())
    took = time.monotonic() - t0
    tl = timeline(b, ROOM_A)
    check(took >= 0.45 and [e["content"].get("body") for e in tl] == ["visible"],
          "only a non-empty filtered result ends the wait", (took, tl))
    s, b, _ = await c.sync(since=nb2, full_state="true", timeout=3000)
    check(s == 200 and set(b["rooms"]["join"]) == {ROOM_A, ROOM_B}
          and "m.room.encryption" in [e["type"] for e in room_entry(b, ROOM_B)["state"]["events"]],
          "full_state=true returns at once with the state of every room", list(b.get("rooms", {}).get("join", {})))


async def filters(c: Client) -> None:
    nb = await c.head()
    await c.control("emit", room=ROOM_A, text="m1")
    await c.control("emit", room=ROOM_A, encrypted=True)
    await c.control("emit", room=ROOM_B, text="m2")
    s, b, _ = await c.sync(since=nb, filter={"room": {"timeline": {"not_types": ["m.room.enc*"]}}})
    check([e["type"] for e in timeline(b, ROOM_A)] == ["m.room.message"] and len(timeline(b, ROOM_B)) == 1,
          "not_types with a * wildcard", b.get("rooms"))
    s, b, _ = await c.sync(since=nb, filter={"room": {"rooms": [ROOM_B]}})
    check(list(b["rooms"]["join"]) == [ROOM_B], "room.rooms limits the rooms", b.get("rooms"))
    s, b, _ = await c.sync(since=nb, filter={"room": {"timeline": {"types": ["m.room.*"], "not_types": ["*"]}}})
    check(s == 200 and "rooms" not in b and b["next_batch"] != nb,
          "not_types wins over types; filtered-out events still advance next_batch", b)
    s, b, _ = await c.get(f"{C}/sync", params={"filter": "{not json"})
    check(s == 400 and b["errcode"] == "M_NOT_JSON", "bad inline filter JSON: 400 M_NOT_JSON", (s, b))
    s, b, _ = await c.get(f"{C}/sync", params={"filter": "12345"})
    check(s == 400 and b["errcode"] == "M_INVALID_PARAM", "unknown filter id: 400 M_INVALID_PARAM", (s, b))
    s, up, _ = await c.req("POST", f"{C}/user/{quote(USER)}/filter",
                           json={"room": {"timeline": {"types": ["m.room.encrypted"]}}})
    s2, b, _ = await c.sync(since=nb, filter=up["filter_id"])
    check(s == 200 and not up["filter_id"].startswith("{") and s2 == 200
          and [e["type"] for e in timeline(b, ROOM_A)] == ["m.room.encrypted"] and ROOM_B not in b["rooms"]["join"],
          "uploaded filter id used on /sync", (up, b.get("rooms")))
    s, b, _ = await c.sync(since="not-a-token")
    s2, b2, _ = await c.sync(since="42")
    check(s == 400 and b == {"errcode": "M_UNKNOWN", "error": "Invalid stream token"} and s2 == 400,
          "unparsable since: 400 M_UNKNOWN Invalid stream token", (s, b, s2))
    s, b, _ = await c.sync(**{"from": nb})
    s2, b2, _ = await c.sync(set_presence="away")
    s3, _, _ = await c.sync(since=nb, set_presence="offline")
    st = await c.stats()
    check(s == 400 and s2 == 400 and b2["errcode"] == "M_INVALID_PARAM" and s3 == 200
          and st["last_set_presence"] == "offline", "from= rejected, set_presence validated and recorded", (b, b2, st))
    far = "s" + str(int(nb[1:].split("_")[0]) + 10_000) + "_" + nb.split("_", 1)[1]
    s, b, _ = await c.sync(since=far)
    check(s == 200 and b["next_batch"] == far, "a token from the future is clamped, not rejected", (s, b))


async def gaps(c: Client) -> None:
    since = await c.head()
    out = await c.control("emit", room=ROOM_A, n=15, text="gap")
    ids = out["event_ids"]
    s, b, _ = await c.sync(since=since)
    ra = room_entry(b, ROOM_A)
    tl = ra["timeline"]
    check(tl["limited"] is True and [e["event_id"] for e in tl["events"]] == ids[-10:] and tl.get("prev_batch")
          and "state" not in ra, "incremental sync with 15 new: limited, last 10, prev_batch", tl)
    s, m, _ = await c.messages(ROOM_A, dir="b", **{"from": tl["prev_batch"]}, to=since, limit=50)
    check(s == 200 and [e["event_id"] for e in m["chunk"]] == list(reversed(ids[:5])) and "end" not in m
          and m["start"] == tl["prev_batch"] and all(e["room_id"] == ROOM_A for e in m["chunk"]),
          "/messages from=prev_batch to=since: the gap newest-first, then no end", m)
    pages, frm, seen = 0, tl["prev_batch"], []
    while True:
        s, m, _ = await c.messages(ROOM_A, dir="b", **{"from": frm}, to=since, limit=2)
        pages += 1
        seen += [e["event_id"] for e in m["chunk"]]
        if "end" not in m or pages > 10:
            break
        frm = m["end"]
    check(seen == list(reversed(ids[:5])) and pages == 3, "limit=2 pages: end present until exhausted", (pages, seen))
    await c.control("messages", empty_pages=1)
    s, m1, _ = await c.messages(ROOM_A, dir="b", **{"from": tl["prev_batch"]}, to=since, limit=50)
    s2, m2, _ = await c.messages(ROOM_A, dir="b", **{"from": m1.get("end", "")}, to=since, limit=50)
    check(m1["chunk"] == [] and m1.get("end") and m1["end"] != tl["prev_batch"]
          and [e["event_id"] for e in m2["chunk"]] == list(reversed(ids[:5])),
          "control empty_pages: empty chunk with an end, then the events", (m1, len(m2.get("chunk", []))))
    await c.control("messages", lazy_end=True)
    s, m, _ = await c.messages(ROOM_A, dir="b", **{"from": tl["prev_batch"]}, to=since, limit=50)
    s2, m2, _ = await c.messages(ROOM_A, dir="b", **{"from": m.get("end", "")}, to=since, limit=50)
    check(len(m["chunk"]) == 5 and "end" in m and m2["chunk"] == [] and "end" not in m2,
          "control lazy_end: end until an empty chunk says the end", (m, m2))
    await c.control("messages")
    s, m, _ = await c.messages(ROOM_A, dir="f", **{"from": since}, limit=3)
    check([e["event_id"] for e in m["chunk"]] == ids[:3] and "end" in m, "dir=f is chronological", m)
    s, m, _ = await c.messages(ROOM_A, dir="b", limit=1)
    check(s == 200 and m["chunk"][0]["event_id"] == ids[-1], "no from: dir=b starts at the newest event", m)
    s, b1, _ = await c.messages(ROOM_A)
    s2, b2, _ = await c.messages(ROOM_A, dir="x")
    s3, b3, _ = await c.messages(ROOM_X, dir="b")
    s4, b4, _ = await c.messages(ROOM_A, dir="b", **{"from": "garbage"})
    check((s, b1["errcode"], s2, b2["errcode"], s3, b3["errcode"], s4) ==
          (400, "M_MISSING_PARAM", 400, "M_INVALID_PARAM", 403, "M_FORBIDDEN", 400),
          "/messages: dir required, dir b|f, 403 outside the room, bad from", (b1, b2, b3, b4))


async def sends(c: Client) -> None:
    since = await c.head()
    txn = "t-" + uuid.uuid4().hex
    s, b, _ = await c.send(ROOM_A, txn, {"msgtype": "m.text", "body": "pong",
                                          "m.relates_to": {"m.in_reply_to": {"event_id": "$orig"}}})
    eid = b.get("event_id", "")
    check(s == 200 and re.fullmatch(r"\$[A-Za-z0-9_-]{43}", eid) is not None, "send: 200 {event_id}", (s, b))
    s, b2, _ = await c.send(ROOM_A, txn, {"msgtype": "m.text", "body": "pong (retry)"})
    events = (await c.page("/_events"))["events"]
    check(s == 200 and b2["event_id"] == eid and sum(e["event_id"] == eid for e in events) == 1
          and sum(e.get("txn_id") == txn for e in events) == 1, "same txnId: same event_id, no second event", b2)
    s, b3, _ = await c.req("PUT", f"{C}/rooms/{ROOM_A}/send/m.room.message/{txn}", json={"body": "x"})
    check(s == 200 and b3["event_id"] == eid, "unencoded room id in the path is the same transaction", b3)
    s, b, _ = await c.sync(since=since)
    echo = [e for e in timeline(b, ROOM_A) if e["event_id"] == eid]
    check(len(echo) == 1 and echo[0]["sender"] == USER and echo[0]["unsigned"].get("transaction_id") == txn,
          "own echo in /sync with unsigned.transaction_id", echo)
    posts = (await c.page("/_posts"))["posts"]
    p = [p for p in posts if p["event_id"] == eid]
    check(len(p) == 1 and p[0]["reply_to"] == "$orig" and p[0]["body"] == "pong" and p[0]["room"] == ROOM_A
          and p[0]["txn_id"] == txn and p[0]["received_unix_ms"] > 0, "/_posts records room, body, txn, reply_to", p)
    s, b, _ = await c.send(ROOM_A, "t-" + uuid.uuid4().hex, {"body": "other"})
    check(s == 200 and b["event_id"] != eid, "a new txnId makes a new event", b)
    s1, b1, _ = await c.send(ROOM_X, "t-x", {"body": "x"})
    s2, b2, _ = await c.req("PUT", f"{C}/rooms/{q(ROOM_A)}/send/m.room.message/t-bad", data=b"{nope")
    check((s1, b1["errcode"], s2, b2["errcode"]) == (403, "M_FORBIDDEN", 400, "M_NOT_JSON"),
          "send: 403 outside the room, 400 M_NOT_JSON", (b1, b2))

    await c.control("post_fault", fault="slow", delay_ms=400)
    txn = "t-" + uuid.uuid4().hex
    before = (await c.stats())["txn_waits"]
    (sa, ba, _), (sb, bb, _) = await asyncio.gather(c.send(ROOM_A, txn, {"body": "c1"}),
                                                    c.send(ROOM_A, txn, {"body": "c2"}))
    events = (await c.page("/_events"))["events"]
    check(sa == sb == 200 and ba == bb and sum(e.get("txn_id") == txn for e in events) == 1
          and (await c.stats())["txn_waits"] == before + 1, "concurrent duplicate waits for the first", (ba, bb))

    await c.control("post_fault", fault="429", retry_after_ms=1200, count=1)
    txn = "t-" + uuid.uuid4().hex
    s, b, h = await c.send(ROOM_A, txn, {"body": "limited"})
    check(s == 429 and b == {"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": 1200}
          and h.get("Retry-After") == "2", "send 429: retry_after_ms and Retry-After", (s, b, dict(h)))
    s, b, _ = await c.send(ROOM_A, txn, {"body": "limited"})
    events = (await c.page("/_events"))["events"]
    check(s == 200 and sum(e.get("txn_id") == txn for e in events) == 1, "a 429 is not cached: the retry sends", b)

    await c.control("post_fault", fault="500")
    txn = "t-" + uuid.uuid4().hex
    s, b, _ = await c.send(ROOM_A, txn, {"body": "five hundred"})
    s2, b2, _ = await c.send(ROOM_A, txn, {"body": "five hundred"})
    events = (await c.page("/_events"))["events"]
    check(s == 500 and b["errcode"] == "M_UNKNOWN" and s2 == 200 and sum(e.get("txn_id") == txn for e in events) == 1,
          "send 500 is not cached: the retry creates the event once", (s, s2))
    await c.control("post_fault", fault="500", status=503, html=True)
    s, b, h = await c.send(ROOM_A, "t-" + uuid.uuid4().hex, {"body": "html"})
    await c.control("post_fault", fault="500", status=504, empty=True)
    s2, b2, _ = await c.send(ROOM_A, "t-" + uuid.uuid4().hex, {"body": "empty"})
    check(s == 503 and h["Content-Type"].startswith("text/html") and "<html>" in b and s2 == 504 and b2 == "",
          "send 5xx variants: HTML page, empty body", (s, b, s2, b2))

    await c.control("post_fault", fault="reset_after")
    txn = "t-" + uuid.uuid4().hex
    # A raw socket: aiohttp's client silently retries a PUT whose connection dropped (the retry would then
    # hit the transaction cache), which hides the reset.
    dropped = await raw_put_dropped(c.base, f"{C}/rooms/{q(ROOM_A)}/send/m.room.message/{txn}", {"body": "reset"})
    posts = (await c.page("/_posts"))["posts"]
    rec = [p for p in posts if p["txn_id"] == txn]
    s, b, _ = await c.send(ROOM_A, txn, {"body": "reset"})
    check(dropped and len(rec) == 1 and s == 200 and b["event_id"] == rec[0]["event_id"],
          "reset_after: recorded, connection dropped, retry gets the same event_id", (dropped, rec, b))

    await c.control("post_fault", fault="hang_after")
    txn = "t-" + uuid.uuid4().hex
    try:
        await c.send(ROOM_A, txn, {"body": "hang"}, ct=0.5)
        timed_out = False
    except asyncio.TimeoutError:
        timed_out = True
    s, b, _ = await c.send(ROOM_A, txn, {"body": "hang"})
    rec = [p for p in (await c.page("/_posts"))["posts"] if p["txn_id"] == txn]
    attempts = [a for a in (await c.page("/_posts"))["attempts"] if a["txn_id"] == txn]
    check(timed_out and len(rec) == 1 and b["event_id"] == rec[0]["event_id"] and len(attempts) == 2
          and attempts[1]["cached"] and attempts[1]["status"] == 200,
          "hang_after: never answered, retry gets the same event_id", (timed_out, rec, attempts))
    st = await c.stats()
    check(st["sends"] >= 14 and st["txn_hits"] >= 5 and st["sends_reset"] == 1 and st["sends_hung"] == 1,
          "stats count sends, txn hits, resets and hangs", st)


async def encryption(c: Client) -> None:
    s, b, _ = await c.get(f"{C}/rooms/{q(ROOM_B)}/state/m.room.encryption/")
    s2, b2, _ = await c.get(f"{C}/rooms/{q(ROOM_A)}/state/m.room.encryption/")
    check(s == 200 and b["algorithm"] == "m.megolm.v1.aes-sha2" and s2 == 404 and b2["errcode"] == "M_NOT_FOUND",
          "GET state/m.room.encryption/: 200 content vs 404 M_NOT_FOUND", (b, b2))
    since = await c.head()
    out = await c.control("encrypt", room=ROOM_A)
    await c.control("emit", room=ROOM_A, encrypted=True)
    s, b, _ = await c.sync(since=since)
    ra = room_entry(b, ROOM_A)
    types = [e["type"] for e in ra["timeline"]["events"]]
    check(types == ["m.room.encryption", "m.room.encrypted"] and "state" not in ra
          and ra["timeline"]["events"][0]["state_key"] == "" and ra["timeline"]["events"][0]["event_id"] == out["event_id"]
          and "ciphertext" in ra["timeline"]["events"][1]["content"],
          "mid-session m.room.encryption only in timeline, then m.room.encrypted", ra)
    s, b, _ = await c.get(f"{C}/rooms/{q(ROOM_A)}/state/m.room.encryption/")
    check(s == 200, "after /_control/encrypt the state endpoint answers 200", (s, b))


async def sync_faults(c: Client) -> None:
    since = await c.head()
    await c.control("fault", fault="429", retry_after_ms=1500, count=1)
    s, b, h = await c.sync(since=since)
    s2, _, _ = await c.sync(since=since)
    check(s == 429 and b["retry_after_ms"] == 1500 and h.get("Retry-After") == "2" and s2 == 200,
          "sync 429 with retry_after_ms + Retry-After, count 1", (s, b, dict(h), s2))
    await c.control("fault", fault="429", header_secs=3, header_date=True, retry_after_ms=None, count=1)
    s, b, h = await c.sync(since=since)
    when = email.utils.parsedate_to_datetime(h.get("Retry-After", "x")) if h.get("Retry-After") else None
    check(s == 429 and "retry_after_ms" not in b and when is not None and 1 <= when.timestamp() - time.time() <= 4,
          "429 variant: HTTP-date header, no body field", (b, dict(h)))
    await c.control("fault", fault="5xx", status=502, html=True, count=2)
    r1, r2, r3 = [await c.sync(since=since) for _ in range(3)]
    check(r1[0] == r2[0] == 502 and r1[2]["Content-Type"].startswith("text/html") and "<html>" in r1[1]
          and r3[0] == 200, "5xx: HTML 502 twice (count 2), then normal", (r1[0], r2[0], r3[0]))
    await c.control("fault", fault="5xx", count=1)
    s, b, _ = await c.sync(since=since)
    check(s == 500 and b["errcode"] == "M_UNKNOWN", "5xx default: 500 JSON M_UNKNOWN", (s, b))
    await c.control("fault", fault="hang", count=1)
    t0 = time.monotonic()
    try:
        await c.sync(since=since, ct=0.6)
        hung = False
    except asyncio.TimeoutError:
        hung = True
    await asyncio.sleep(0.1)
    st = await c.stats()
    check(hung and time.monotonic() - t0 >= 0.55 and st["hung"] == 1 and st["live_syncs"] == 0,
          "hang: no answer at all; the server drops it when the client leaves", (hung, st["hung"], st["live_syncs"]))
    await c.control("fault", fault="half_body", count=1)
    got_headers, body_timed_out, clen, got = False, False, None, b""
    async with c.http.get(c.base + f"{C}/sync", params={"since": since},
                          headers={"Authorization": f"Bearer {TOKEN}"}) as r:
        got_headers = r.status == 200
        clen = r.content_length
        try:
            got = await asyncio.wait_for(r.content.readexactly(clen or 1), 0.6)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError):
            body_timed_out = True
    check(got_headers and body_timed_out and clen and clen > 0, "half_body: 200 headers, then the body stalls",
          (got_headers, body_timed_out, clen, len(got)))
    await c.control("fault", fault="unknown_token", soft_logout=True, count=1)
    s, b, _ = await c.sync(since=since)
    s2, _, _ = await c.sync(since=since)
    check(s == 401 and b["errcode"] == "M_UNKNOWN_TOKEN" and b["soft_logout"] is True and s2 == 200,
          "unknown_token fault: 401 soft_logout true on /sync, count 1", (s, b, s2))
    await c.control("emit", room=ROOM_A, text="pending")
    await c.control("fault", fault="repeat_batch", count=2)
    s0, b0, _ = await c.sync()  # an initial sync does not consume it
    r = [await c.sync(since=since, timeout=2000) for _ in range(3)]
    check(s0 == 200 and r[0][1] == {"next_batch": since} and r[1][1] == {"next_batch": since}
          and [e["content"]["body"] for e in timeline(r[2][1], ROOM_A)] == ["pending"],
          "repeat_batch: next_batch == since at once, twice, then the events", [x[1] for x in r[:2]])
    await c.control("fault", fault="invalid_since", count=1)
    s0, _, _ = await c.sync()
    s, b, _ = await c.sync(since=since)
    s2, _, _ = await c.sync(since=since)
    check(s0 == 200 and s == 400 and b == {"errcode": "M_UNKNOWN", "error": "Invalid stream token"} and s2 == 200,
          "invalid_since: 400 for a valid since; initial sync unaffected", (s0, s, b, s2))
    await c.control("fault", fault="hang")
    await c.control("clear")
    s, _, _ = await c.sync(since=since)
    check(s == 200, "clear lifts a fault without count", s)

    head = await c.head()

    async def revoke_later() -> None:
        await asyncio.sleep(0.3)
        await c.control("revoke")

    t0 = time.monotonic()
    (s, b, _), _ = await asyncio.gather(c.sync(since=head, timeout=3000), revoke_later())
    took = time.monotonic() - t0
    s2, b2, _ = await c.get(f"{C}/account/whoami")
    await c.control("revoke", soft_logout=True)
    s3, b3, _ = await c.get(f"{C}/joined_rooms")
    await c.control("restore")
    s4, _, _ = await c.get(f"{C}/account/whoami")
    check(s == 401 and took < 1.5 and b["errcode"] == "M_UNKNOWN_TOKEN" and s2 == 401 and b2["soft_logout"] is False
          and s3 == 401 and b3["soft_logout"] is True and s4 == 200,
          "revoke: held sync answered 401 at once, every endpoint 401; restore", (s, took, b2, b3, s4))


async def records(c: Client) -> None:
    st = await c.stats()
    check(st["syncs"] > 30 and st["syncs_answered"] < st["syncs"] and st["refused"] >= 10 and st["limited"] >= 2
          and st["messages_requests"] >= 10 and st["live_syncs"] == 0 and st["max_syncs_per_s"] >= 3
          and len(st["sync_request_ms"]) == min(st["syncs"], 2000) and st["syncs_early"] >= 2,
          "stats: syncs, answered, refused, limited, messages, live, max per second", st)
    ev = (await c.page("/_events"))["events"]
    check(all({"room", "sender", "type", "event_id"} <= set(e) for e in ev) and [e["pos"] for e in ev] ==
          list(range(1, len(ev) + 1)) and ev[0]["type"] == "m.room.create" and any(e["sender"] == USER for e in ev),
          "/_events lists every event in order", ev[:2])
    posts = await c.page("/_posts")
    check(len(posts["attempts"]) > len(posts["posts"]) and {a["status"] for a in posts["attempts"]} >= {200, 429, 500},
          "/_posts attempts carry statuses", {a["status"] for a in posts["attempts"]})
    old = (await c.control("emit", room=ROOM_B, n=0))["next_batch"]
    await c.control("emit", room=ROOM_B, n=25, text="catch-up")
    s, b, _ = await c.sync(since=old)
    rb = room_entry(b, ROOM_B)
    check(rb["timeline"]["limited"] and len(rb["timeline"]["events"]) == 10 and ROOM_A not in b["rooms"]["join"],
          "an older since gets a limited catch-up, only rooms with news", rb["timeline"]["limited"])


async def fetch(c: Client, path: str, token: str | None = TOKEN) -> tuple[int, bytes, Any]:
    """A download: status, raw body, headers."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with c.http.get(c.base + path, headers=headers) as r:
        return r.status, await r.read(), r.headers


async def upload(c: Client, data: Any, name: str | None, ctype: str, token: str | None = TOKEN
                 ) -> tuple[int, Any]:
    headers = {"Content-Type": ctype}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    params = {"filename": name} if name is not None else {}
    async with c.http.post(c.base + "/_matrix/media/v3/upload", params=params, data=data, headers=headers) as r:
        return r.status, await r.json()


async def media(c: Client) -> None:
    """The content repository: config, upload, authenticated download, the cap, the file records."""
    s, b, _ = await c.get("/_matrix/client/v1/media/config")
    s2, b2, _ = await c.get("/_matrix/client/v1/media/config", token=None)
    check(s == 200 and b == {"m.upload.size": MAX_UPLOAD} and s2 == 401 and b2["errcode"] == "M_MISSING_TOKEN",
          "media/config: m.upload.size from --max-upload-bytes, behind auth", (s, b, s2, b2))
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(1_500_000)
    s, up = await upload(c, png, "chart one.png", "image/png")
    uri = up.get("content_uri", "")
    mid = uri.rsplit("/", 1)[-1]
    check(s == 200 and re.fullmatch(r"mxc://check\.test/[A-Za-z]{24}", uri) is not None,
          "upload: 200 {content_uri: mxc://<server>/<id>}", (s, up))
    s, b = await upload(c, b"x", "x.bin", "application/octet-stream", token=None)
    check(s == 401 and b["errcode"] == "M_MISSING_TOKEN", "upload without a token: 401", (s, b))
    on_disk = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(MEDIA_PARENT) for f in fs]
    check(on_disk == [len(png)], "the upload is a file under --media-dir, whole", on_disk)
    s, got, h = await fetch(c, f"/_matrix/client/v1/media/download/check.test/{mid}")
    check(s == 200 and got == png and h["Content-Type"] == "image/png"
          and h["Content-Disposition"] == 'inline; filename="chart one.png"' and h["Content-Length"] == str(len(png)),
          "download: the same bytes, Content-Type as uploaded, inline with the filename", (s, len(got), dict(h)))
    s, got, h = await fetch(c, f"/_matrix/client/v1/media/download/check.test/{mid}/renamed.png")
    s2, _, _ = await fetch(c, f"/_matrix/client/v1/media/download/check.test/{mid}", token=None)
    check(s == 200 and got == png and h["Content-Disposition"] == 'inline; filename="renamed.png"' and s2 == 401,
          "download/{fileName} names the file so; no token: 401", (s, dict(h), s2))
    s, pdf = await upload(c, b"%PDF-1.4 tiny", None, "application/pdf")
    s2, _, h = await fetch(c, f"/_matrix/client/v1/media/download/check.test/{pdf['content_uri'].rsplit('/', 1)[-1]}")
    check(s == 200 and s2 == 200 and h["Content-Disposition"] == "attachment",
          "a PDF without filename: attachment, no filename", (s, s2, dict(h)))
    r1 = await fetch(c, "/_matrix/client/v1/media/download/check.test/nosuchmedia")
    r2 = await fetch(c, f"/_matrix/client/v1/media/download/other.test/{mid}")
    r3 = await fetch(c, f"/_matrix/media/v3/download/check.test/{mid}", token=None)
    check([r[0] for r in (r1, r2, r3)] == [404] * 3 and all(json.loads(r[1])["errcode"] == "M_NOT_FOUND"
                                                             for r in (r1, r2, r3)),
          "unknown id, another server, the frozen unauthenticated route: 404 M_NOT_FOUND", [r[:2] for r in (r1, r2, r3)])
    before = await c.page("/_independent/media")
    s, b = await upload(c, os.urandom(MAX_UPLOAD + 1), "big.bin", "application/octet-stream")

    async def chunked() -> Any:  # no Content-Length: the cap is found while streaming
        for _ in range(3):
            yield os.urandom(MAX_UPLOAD // 2)
    s2, b2 = await upload(c, chunked(), "big2.bin", "application/octet-stream")
    after = await c.page("/_independent/media")
    on_disk = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(MEDIA_PARENT) for f in fs]
    check(s == s2 == 413 and b["errcode"] == b2["errcode"] == "M_TOO_LARGE" and len(after["files"]) ==
          len(before["files"]) and len(on_disk) == 2, "over m.upload.size (declared or streamed): 413 M_TOO_LARGE, "
          "nothing kept", (s, b, s2, b2, on_disk))
    info = {"mimetype": "image/png", "size": len(png)}
    s, sent, _ = await c.send(ROOM_A, "media-1", {"msgtype": "m.image", "body": "a chart", "filename": "chart one.png",
                                                  "url": uri, "info": info})
    await c.send(ROOM_A, "media-2", {"msgtype": "m.file", "body": "gone.pdf", "url": "mxc://check.test/missing"})
    await c.send(ROOM_A, "media-3", {"msgtype": "m.text", "body": "no file"})
    ev = (await c.page("/_independent/media"))["file_events"]
    mine = [e for e in ev if e["source"] == "send"]
    check(len(mine) == 2 and mine[0]["event_id"] == sent["event_id"] and mine[0]["in_repo"] is True
          and mine[0]["sha256"] == hashlib.sha256(png).hexdigest() and mine[0]["size"] == len(png)
          and mine[0]["info_size_matches"] and mine[0]["txn_id"] == "media-1" and mine[1]["in_repo"] is False
          and mine[1]["sha256"] is None, "file events the bot sends are recorded with the repository's sha256 and "
          "size (m.text is not)", mine)
    async with c.http.post(c.base + "/_independent/media", params={"filename": "in.png", "emit": "m.image",
                                                                   "body": "look"}, data=png[:1000],
                           headers={"Content-Type": "image/png"}) as r:
        put = await r.json()
    s, b, _ = await c.sync(since=await c.head_before(put), timeout=0)
    tl = [e for e in timeline(b, ROOM_A) if e["event_id"] == put.get("event_id")]
    check(put.get("ok") and put["size"] == 1000 and put["source"] == "bench" and len(tl) == 1
          and tl[0]["content"] == {"msgtype": "m.image", "body": "look", "filename": "in.png", "url":
                                   put["content_uri"], "info": {"mimetype": "image/png", "size": 1000}}
          and tl[0]["sender"] == "@alice:check.test",
          "/_independent/media?emit=m.image puts the file and the peer's event names it in /sync", (put, tl))
    async with c.http.post(c.base + "/_independent/media/emit", json={"media_id": put["media_id"],
                                                                      "msgtype": "m.file"}) as r:
        e1 = (r.status, await r.json())
    async with c.http.post(c.base + "/_independent/media/emit", json={"media_id": "nope"}) as r:
        e2 = (r.status, await r.json())
    check(e1[0] == 200 and e1[1]["event_id"].startswith("$") and e2[0] == 400 and "no media" in e2[1]["error"],
          "/_independent/media/emit: an event for a file already in; an unknown one: 400", (e1, e2))
    st = await c.stats()
    posts = (await c.page("/_posts"))["posts"]
    check(st["media_uploads"] == 3 and st["media_uploads_refused"] == 2 and st["media_downloads"] == 3
          and st["media_downloads_missing"] == 3 and st["media_bytes_out"] == 2 * len(png) + len(b"%PDF-1.4 tiny")
          and st["file_events"] == 4 and isinstance(posts[-1].get("received_unix_us"), int),
          "stats count the media; posts carry received_unix_us", {k: v for k, v in st.items() if "media" in k})


async def defaults_server(http: aiohttp.ClientSession, base: str) -> None:
    c = Client(http, base, token="mx-indep-token")
    s, b, _ = await c.get(f"{C}/account/whoami")
    s2, b2, _ = await c.get(f"{C}/joined_rooms")
    check(s == 200 and b["user_id"] == "@bot:indep.test" and b2 == {"joined_rooms": ["!r1:indep.test"]},
          "defaults: mx-indep-token, @bot:indep.test, !r1:indep.test", (b, b2))
    nb = await c.head()
    t0 = time.monotonic()
    s, b, _ = await c.sync(since=nb, timeout=60000)
    took = time.monotonic() - t0
    check(s == 200 and 0.35 <= took < 1.5 and b["next_batch"] == nb, "--max-timeout-ms caps the hold", took)
    s, b, _ = await c.get(f"/_matrix/client/r0/sync", params={"since": nb})
    check(s == 200 and b["next_batch"] == nb, "r0 path prefix works too", (s, b))


async def start(*flags: str) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, os.path.join(HERE, "matrix_server.py"), "--port", "0",
                                                *flags, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode().strip()
    check(re.fullmatch(r"listening http://127\.0\.0\.1:\d+", line) is not None, "startup line", line)
    return proc, line.split(" ", 1)[1]


async def stop(proc: asyncio.subprocess.Process, name: str) -> None:
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(proc.wait(), 10)
    rest = await proc.stdout.read() if proc.stdout else b""
    check(code == 0 and rest == b"", f"{name}: SIGTERM exits 0, no more stdout", (code, rest))


async def main() -> int:
    main_proc, base = await start("--access-token", TOKEN, "--user-id", USER, "--device-id", DEVICE,
                                  "--rooms", f"{ROOM_A},{ROOM_B}", "--encrypted-rooms", ROOM_B,
                                  "--max-timeout-ms", "5000", "--max-upload-bytes", str(MAX_UPLOAD),
                                  "--media-dir", MEDIA_PARENT)
    other_proc, other = await start("--max-timeout-ms", "400")
    t0 = time.monotonic()
    try:
        async with aiohttp.ClientSession() as http:
            c = Client(http, base)
            for step in (basics, initial_sync, long_poll, filters, gaps, sends, encryption, sync_faults, records,
                         media):
                await asyncio.wait_for(step(c), 60)
            await defaults_server(http, other)
            # SIGTERM with a held sync and a hung one still exits 0
            head = await c.head()
            await c.control("fault", fault="hang", count=1)
            held = [asyncio.create_task(c.sync(since=head, timeout=4000)) for _ in range(2)]
            await asyncio.sleep(0.3)
            await stop(main_proc, "main server")
            for t in held:
                try:
                    await t
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    pass
    finally:
        for proc, name in ((main_proc, "main server"), (other_proc, "defaults server")):
            if proc.returncode is None:
                await stop(proc, name)
    left = [f for _, _, fs in os.walk(MEDIA_PARENT) for f in fs]
    check(left == [], "the media directory is removed on exit", left)
    os.rmdir(MEDIA_PARENT)
    print(f"{counter} checks, {len(failures)} failure(s) in {time.monotonic() - t0:.1f} s"
          + (": " + "; ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
