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
        assert await next_event(ws) == {"status": "OK", "seq_reply": 1}
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
        assert await next_event(ws) == {"status": "OK", "seq_reply": 1}, "the challenge, without the header"
        assert (await next_event(ws))["event"] == "hello"
        await http.post(f"{base}/_control/fault", json={"kind": "revoke"})
        r = await http.get(f"{base}/api/v4/users/me", headers=AUTH)
        assert r.status == 401, "a revoked token is 401"
        await ws.close()


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
