#!/usr/bin/env python3
"""Self-check of dingtalk_server.py against DingTalk's documented Stream behaviour: open with the
app's credentials, one connection per ticket, a robot message pushed as a CALLBACK frame and
pushed again (same msgId, new messageId) until acked, SYSTEM pings answered, a disconnect
followed by the close, refused credentials, and a send with the access token.
Usage: check_dingtalk_server.py PYTHON_OF_THE_SERVER (run by the bench venv's python)."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp

HERE = Path(__file__).resolve().parent
ID, SECRET = "dingindependent", "independent-secret"


async def main() -> None:
    proc = subprocess.Popen([sys.executable, str(HERE / "dingtalk_server.py"), "--port", "0", "--ack-timeout-s", "0.5",
                             "--max-retries", "2", "--system-ping-s", "0.2", "--disconnect-grace-s", "0.5"],
                            stdout=subprocess.PIPE, text=True)
    base = proc.stdout.readline().strip().removeprefix("listening ")
    try:
        async with aiohttp.ClientSession() as http:
            async def post(path: str, body: dict, **kw) -> tuple[int, dict]:
                async with http.post(base + path, json=body, **kw) as r:
                    return r.status, await r.json(content_type=None)

            status, bad = await post("/v1.0/gateway/connections/open", {"clientId": ID, "clientSecret": "wrong"})
            assert status == 400 and bad["code"] == "invalidClientIdOrSecret", bad
            subs = [{"type": "CALLBACK", "topic": "/v1.0/im/bot/messages/get"}]
            status, o = await post("/v1.0/gateway/connections/open",
                                   {"clientId": ID, "clientSecret": SECRET, "subscriptions": subs})
            assert status == 200 and o["endpoint"].startswith("ws://"), o
            url = f"{o['endpoint']}?ticket={o['ticket']}"
            ws = await http.ws_connect(url, autoping=False)
            try:
                await http.ws_connect(url)
                raise AssertionError("a ticket opened two connections")
            except aiohttp.WSServerHandshakeError as e:
                assert e.status == 401, e
            _, emitted = await post("/_control/emit", {"count": 1})
            msg_id = emitted["msg_ids"][0]
            seen, pinged = [], False
            while len(seen) < 2 or not pinged:
                v = json.loads((await asyncio.wait_for(ws.receive(), 5)).data)
                h = v["headers"]
                if v["type"] == "SYSTEM" and h["topic"] == "ping":
                    pinged = True
                    await ws.send_str(json.dumps({"code": 200, "headers": {"messageId": h["messageId"]},
                                                  "message": "OK", "data": v["data"]}))
                elif v["type"] == "CALLBACK":
                    assert h["topic"] == "/v1.0/im/bot/messages/get", h
                    assert json.loads(v["data"])["msgId"] == msg_id, v
                    seen.append(h["messageId"])
            assert seen[0] != seen[1], "a push again has a new messageId"
            await ws.send_str(json.dumps({"code": 200, "headers": {"messageId": seen[1]}, "message": "OK",
                                          "data": "{}"}))
            await ws.ping(b"x")
            assert (await asyncio.wait_for(ws.receive(), 5)).type in (aiohttp.WSMsgType.PONG, aiohttp.WSMsgType.TEXT)
            await asyncio.sleep(0.3)
            async with http.get(base + "/_independent/stats") as r:
                stats = await r.json()
            assert stats["acked"] == 1 and stats["redeliveries"] >= 1 and stats["system_answers"] >= 1, stats
            await post("/_control/fault", {"kind": "disconnect"})
            kinds = []
            while True:
                m = await asyncio.wait_for(ws.receive(), 5)
                if m.type != aiohttp.WSMsgType.TEXT:
                    break
                kinds.append(json.loads(m.data)["headers"]["topic"])
            assert "disconnect" in kinds, kinds
            status, t = await post("/v1.0/oauth2/accessToken", {"appKey": ID, "appSecret": SECRET})
            assert status == 200 and t["expireIn"] == 7200, t
            status, sent = await post("/v1.0/robot/groupMessages/send",
                                      {"robotCode": ID, "openConversationId": "cidIndepGroup==", "msgKey": "sampleText",
                                       "msgParam": json.dumps({"content": "hi"})},
                                      headers={"x-acs-dingtalk-access-token": t["accessToken"]})
            assert status == 200 and sent["processQueryKey"], sent
            status, _ = await post("/v1.0/robot/groupMessages/send", {}, headers={"x-acs-dingtalk-access-token": "no"})
            assert status == 401
        print("dingtalk_server.py: ok")
    finally:
        proc.terminate()
        proc.wait(5)


if __name__ == "__main__":
    asyncio.run(main())
