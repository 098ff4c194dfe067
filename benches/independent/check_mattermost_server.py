#!/usr/bin/env python3
"""Self-check of mattermost_server.py: starts it, and checks each behaviour README.md lists
with a plain aiohttp client. Exit 0 when all hold; the first that does not is printed."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp

HERE = Path(__file__).parent
TOKEN = "independentmattermosttoken"
OPEN = "indepopen00000000000000000"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def next_event(ws: aiohttp.ClientWebSocketResponse) -> dict:
    msg = await asyncio.wait_for(ws.receive(), 5)
    assert msg.type == aiohttp.WSMsgType.TEXT, msg
    return json.loads(msg.data)


async def checks(base: str) -> None:
    async with aiohttp.ClientSession() as http:
        r = await http.get(f"{base}/api/v4/users/me")
        assert r.status == 401, "users/me without a token is 401"
        me = await (await http.get(f"{base}/api/v4/users/me", headers=AUTH)).json()
        assert len(me["id"]) == 26 and me["username"] == "hermes", me
        chans = await (await http.get(f"{base}/api/v4/users/me/channels", headers=AUTH)).json()
        assert {c["type"] for c in chans} == {"O", "D"}, chans

        ws = await http.ws_connect(f"{base.replace('http', 'ws')}/api/v4/websocket", headers=AUTH, autoping=False)
        hello = await next_event(ws)
        assert hello["event"] == "hello" and hello["seq"] == 0 and hello["data"]["connection_id"], hello
        await ws.send_str(json.dumps({"seq": 1, "action": "authentication_challenge", "data": {"token": TOKEN}}))
        await ws.send_str(json.dumps({"seq": 2, "action": "ping"}))
        pong = await next_event(ws)
        assert pong["seq_reply"] == 2 and pong["data"]["text"] == "pong", f"the challenge unanswered: {pong}"
        await ws.ping(b"p")
        assert (await asyncio.wait_for(ws.receive(), 5)).type == aiohttp.WSMsgType.PONG, "a ping is answered"

        body = {"channel_id": OPEN, "message": "hi", "pending_post_id": "checkpending"}
        first = await (await http.post(f"{base}/api/v4/posts", json=body, headers=AUTH)).json()
        posted = await next_event(ws)
        assert posted["event"] == "posted" and posted["seq"] == 1, posted
        assert json.loads(posted["data"]["post"])["id"] == first["id"]
        again = await http.post(f"{base}/api/v4/posts", json=body, headers=AUTH)
        assert again.status == 201 and (await again.json())["id"] == first["id"], "one pending_post_id, one post"

        emitted = await (await http.post(f"{base}/_control/emit", json={"count": 1, "message": "@hermes hi"})).json()
        event = await next_event(ws)
        assert json.loads(event["data"]["post"])["id"] == emitted["post_ids"][0]
        assert json.loads(event["data"]["mentions"]) == [me["id"]], event
        since = first["create_at"]
        listed = await (await http.get(f"{base}/api/v4/channels/{OPEN}/posts?since={since}", headers=AUTH)).json()
        assert set(listed["order"]) == {first["id"], emitted["post_ids"][0]}, listed

        ws = await resume(http, base, ws, hello["data"]["connection_id"], event["seq"] + 1)

        await http.post(f"{base}/_control/fault", json={"kind": "silence"})
        await ws.ping(b"p")
        try:
            msg = await asyncio.wait_for(ws.receive(), 1)
            raise AssertionError(f"a silenced socket answered: {msg}")
        except asyncio.TimeoutError:
            pass
        await ws.close()

        ws = await http.ws_connect(f"{base.replace('http', 'ws')}/api/v4/websocket", autoping=False)
        await ws.send_str(json.dumps({"seq": 1, "action": "authentication_challenge", "data": {"token": TOKEN}}))
        assert (await next_event(ws))["event"] == "hello", "the challenge, without the header: hello first"
        assert await next_event(ws) == {"status": "OK", "seq_reply": 1}, "then its answer"
        await http.post(f"{base}/_control/fault", json={"kind": "revoke"})
        r = await http.get(f"{base}/api/v4/users/me", headers=AUTH)
        assert r.status == 401, "a revoked token is 401"
        await ws.close()


async def gone(http: aiohttp.ClientSession, base: str, ws: aiohttp.ClientWebSocketResponse) -> None:
    """Drops the socket without a frame and waits for the server to see it go."""
    await http.post(f"{base}/_control/fault", json={"kind": "drop"})
    await asyncio.wait_for(ws.receive(), 5)
    for _ in range(100):
        if (await (await http.get(f"{base}/_independent/stats")).json())["live"] == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the server never saw the socket go")


async def resume(http: aiohttp.ClientSession, base: str, ws: aiohttp.ClientWebSocketResponse,
                 conn: str, n: int) -> aiohttp.ClientWebSocketResponse:
    """A dropped socket resumed: what was posted while away, numbered on, no hello; then one
    forgotten (a restart) answered with a new connection id and hello."""
    url = f"{base.replace('http', 'ws')}/api/v4/websocket"
    await gone(http, base, ws)
    away = (await (await http.post(f"{base}/_control/emit", json={"count": 2})).json())["post_ids"]
    ws = await http.ws_connect(f"{url}?connection_id={conn}&sequence_number={n}", headers=AUTH, autoping=False)
    for i, post_id in enumerate(away):
        event = await next_event(ws)
        assert event["event"] == "posted" and event["seq"] == n + i, f"held, numbered on: {event}"
        assert json.loads(event["data"]["post"])["id"] == post_id
    stats = await (await http.get(f"{base}/_independent/stats")).json()
    assert (stats["resumed"], stats["resume_held"]) == (1, 2), stats
    await gone(http, base, ws)
    await http.post(f"{base}/_control/forget")
    ws = await http.ws_connect(f"{url}?connection_id={conn}&sequence_number={n + 2}", headers=AUTH, autoping=False)
    hello = await next_event(ws)
    assert hello["event"] == "hello" and hello["seq"] == 0 and hello["data"]["connection_id"] != conn, hello
    bad = await http.ws_connect(f"{url}?connection_id=x&sequence_number=1", headers=AUTH, autoping=False)
    assert (await asyncio.wait_for(bad.receive(), 5)).type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSE,
                                                                 aiohttp.WSMsgType.ERROR), "an invalid id: closed"
    return ws


def main() -> int:
    proc = subprocess.Popen([sys.executable, str(HERE / "mattermost_server.py"), "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening http://127.0.0.1:"), line
        asyncio.run(checks(line.removeprefix("listening ")))
        print("ok")
        return 0
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    sys.exit(main())
