#!/usr/bin/env python3
"""Independent QQ Bot v2 + Discord gateway server for the hermes-svc benchmarks.

Written only from the platforms' public docs and SDK sources, never from the
project's own mock, so that it does not agree with our client by construction.
Sources (details per behaviour in README.md):

QQ   tencent-connect/bot-docs  docs/develop/api-v2/dev-prepare/interface-framework/
       {api-use,event-emit,opcode}.md, .../dev-prepare/error-trace/{websocket,openapi}.md,
       docs/develop/api/openapi/wss/url_get.md, docs/develop/api/gateway/{reference,message}.md,
       docs/develop/api-v2/server-inter/message/{send-receive/send.md,post_messages.md},
       docs/develop/api-v2/openapi/error/error.md
     tencent-connect/botpy botpy/gateway.py, botpy/robot.py
     tencent-connect/botgo websocket/client/client.go, dto/websocket_payload.go, dto/websocket.go
Discord  discord/discord-api-docs docs/topics/gateway.mdx, docs/events/gateway-events.mdx,
       docs/topics/opcodes-and-status-codes.md, docs/resources/message.mdx (Create Message)

One asyncio loop serves HTTP (keep-alive on) and every WebSocket.  Each socket
has one reader (the handler) and one writer task draining an ordered outbox, so
replays, acks and live dispatches can never interleave out of order; one global
sweeper enforces heartbeat deadlines; a session emits test dispatches from one
sleeping task (also while disconnected, so Resume has something to replay).
"""
from __future__ import annotations

import argparse
import sys
import asyncio
import collections
import hashlib
import json
import random
import resource
import secrets
import signal
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from aiohttp import WSMsgType, web

DISPATCH, HEARTBEAT, IDENTIFY, RESUME, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 0, 1, 2, 6, 9, 10, 11
DISCORD_CLIENT_OPS = {3, 4, 8, 31}  # presence, voice state, guild members, soundboard: accepted, ignored
DISCORD_EPOCH_MS = 1420070400000
QQ_TOKEN_RENEW_S = 60  # api-use.md: a new token is handed out within 60 s of expiry
OUTBOX_LIMIT = 10_000  # frames a slow reader may fall behind before it is dropped
QQ_BAD_TOKEN = {"message": "token not exist or expire", "code": 11244, "err_code": 11244}
DISCORD_UNAUTHORIZED = {"message": "401: Unauthorized", "code": 0}
SESSION_LIMIT = {"total": 1000, "remaining": 1000, "reset_after": 86400000, "max_concurrency": 1}
# Canned parts of the test events (QQ: bot-docs gateway/message.md example;
# Discord: message object fields from the discord-api-docs examples).
QQ_MESSAGE = {"author": {"avatar": "", "bot": False, "id": "10001", "username": "bench-user"},
              "channel_id": "100010", "guild_id": "18700000000001",
              "member": {"joined_at": "2021-04-12T16:34:42+08:00", "roles": ["1"]}}
DISCORD_MESSAGE = {"channel_id": "41771983423143937", "guild_id": "41771983423143936",
                   "author": {"id": "80351110224678912", "username": "bench-user", "discriminator": "0",
                              "global_name": None, "avatar": None},
                   "member": {"roles": [], "joined_at": "2021-04-12T08:34:42.000000+00:00",
                              "deaf": False, "mute": False},
                   "edited_timestamp": None, "tts": False, "mention_everyone": False, "mention_roles": [],
                   "attachments": [], "embeds": [], "pinned": False, "type": 0}
CST = timezone(timedelta(hours=8))
# Send endpoints.  Discord resources/message.mdx "Create Message": content up to 2000
# characters, nonce up to 25, enforce_nonce dedupes per author "in the past few minutes".
# QQ v2 send-receive/send.md: msg_id + msg_seq (default 1) repeated fails; the refusal's code
# and text are as clients report them live (e.g. HKUDS/nanobot#1499).
DISCORD_MAX_CONTENT, DISCORD_MAX_NONCE, DISCORD_NONCE_WINDOW_S = 2000, 25, 300
SEND_TARGETS = {"groups": "group", "users": "user", "channels": "channel", "dms": "dm"}
QQ_DUPLICATE = {"code": 40054005, "err_code": 40054005, "message": "消息被去重，请检查请求msgseq"}


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def stable_id(seed: str) -> int:
    return int.from_bytes(hashlib.sha256(seed.encode()).digest()[:7], "big")


class Session:
    __slots__ = ("sid", "platform", "token", "app_id", "user", "seq", "buffer", "evicted", "conn", "pump",
                 "expiry")

    def __init__(self, sid: str, platform: str, token: str, app_id: str, user: dict, replay: int) -> None:
        self.sid, self.platform, self.token, self.app_id, self.user = sid, platform, token, app_id, user
        self.seq = 0
        self.buffer: collections.deque[tuple[int, str]] = collections.deque(maxlen=replay)
        self.evicted = 0  # highest seq that fell out of the replay buffer
        self.conn: Conn | None = None
        self.pump: asyncio.Task | None = None
        self.expiry: asyncio.TimerHandle | None = None


class Conn:
    __slots__ = ("ws", "platform", "version", "outbox", "last_beat", "session", "closing")

    def __init__(self, ws: web.WebSocketResponse, platform: str, version: int) -> None:
        self.ws, self.platform, self.version = ws, platform, version  # platform: path hint until identify
        self.outbox: asyncio.Queue[str | tuple[int, str]] = asyncio.Queue()
        self.last_beat = time.monotonic()
        self.session: Session | None = None
        self.closing = False

    def send_text(self, text: str) -> None:
        if self.closing:
            return
        if self.outbox.qsize() >= OUTBOX_LIMIT:  # reader stopped reading: drop it, keep its session
            while not self.outbox.empty():
                self.outbox.get_nowait()
            self.close(4000, "Unknown error (client too slow)")
            return
        self.outbox.put_nowait(text)

    def send(self, op: int, d: Any = None, s: int | None = None, t: str | None = None) -> None:
        if op == DISPATCH or self.platform == "discord":  # Discord: s and t are null unless op 0
            self.send_text(dumps({"op": op, "d": d, "s": s, "t": t}))
        else:  # QQ docs show bare {"op": 11}, {"op": 10, "d": {...}}
            self.send_text(dumps({"op": op} if d is None else {"op": op, "d": d}))

    def close(self, code: int, reason: str) -> None:
        if not self.closing:
            self.outbox.put_nowait((code, reason))  # after everything already queued
            self.closing = True


class Platform:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.interval_ms: int = args.heartbeat_interval_ms
        self.tokens: dict[str, tuple[str, float]] = {}  # access_token -> (appId, expires_at)
        self.app_tokens: dict[str, str] = {}  # appId -> current access_token
        self.sessions: dict[str, Session] = {}
        self.conns: set[Conn] = set()
        self.stats = collections.Counter()
        self.port = 0
        self.posts: list[dict] = []  # accepted sends, in order
        self.attempts: list[dict] = []  # every send request and its status
        self.nonces: dict[tuple[str, str], tuple[float, dict]] = {}  # (bot token, nonce) -> (t, message)
        self.replies: set[tuple[str, int]] = set()  # QQ (msg_id, msg_seq) already sent
        self.started = time.monotonic()

    # ---------------------------------------------------------------- HTTP
    async def app_access_token(self, req: web.Request) -> web.Response:
        self.stats["token_requests"] += 1
        # QQ answers these failures with HTTP 200 and a {code, message} body.
        try:
            body = await req.json() if req.content_type == "application/json" else None
        except ValueError:
            body = None
        app_id = body.get("appId") if isinstance(body, dict) else None
        if not isinstance(app_id, str) or not app_id:
            return web.json_response({"code": 100007, "message": "appid invalid"}, dumps=dumps)
        expected = self.args.expected_secret
        if expected is not None and body.get("clientSecret") != expected:
            return web.json_response({"code": 100016, "message": "invalid appid or secret"}, dumps=dumps)
        now = time.time()
        token = self.app_tokens.get(app_id)
        if token is None or self.tokens[token][1] - now <= QQ_TOKEN_RENEW_S:
            for old in [t for t, (_, exp) in self.tokens.items() if exp <= now]:
                del self.tokens[old]
            token = secrets.token_urlsafe(36)
            self.tokens[token] = (app_id, now + self.args.token_ttl_s)
            self.app_tokens[app_id] = token
            self.stats["tokens_issued"] += 1
        remaining = int(self.tokens[token][1] - now)
        return web.json_response({"access_token": token, "expires_in": str(remaining)}, dumps=dumps)

    def qq_app(self, access_token: str) -> str | None:
        rec = self.tokens.get(access_token)
        return rec[0] if rec and rec[1] > time.time() else None

    def qq_unauthorized(self) -> web.Response:
        body = {**QQ_BAD_TOKEN, "trace_id": secrets.token_hex(16)}
        return web.json_response(body, status=401, dumps=dumps)

    def discord_token_ok(self, token: str) -> bool:
        want = self.args.discord_token
        return bool(token) and not any(c.isspace() for c in token) and (want is None or token == want)

    def gateway_bot_body(self, url: str) -> dict:
        return {"url": url, "shards": 1, "session_start_limit": SESSION_LIMIT}

    async def gateway(self, req: web.Request) -> web.Response:
        self.stats["gateway_requests"] += 1
        auth = req.headers.get("Authorization", "")
        if auth.startswith("QQBot "):
            if self.qq_app(auth[6:]) is None:
                return self.qq_unauthorized()
            return web.json_response({"url": self.qq_ws_url}, dumps=dumps)
        return web.json_response({"url": self.discord_ws_url}, dumps=dumps)  # Discord: no auth needed

    async def gateway_bot(self, req: web.Request) -> web.Response:
        self.stats["gateway_requests"] += 1
        auth = req.headers.get("Authorization", "")
        if auth.startswith("QQBot "):
            if self.qq_app(auth[6:]) is None:
                return self.qq_unauthorized()
            return web.json_response(self.gateway_bot_body(self.qq_ws_url), dumps=dumps)
        if auth.startswith("Bot ") and self.discord_token_ok(auth[4:]):
            return web.json_response(self.gateway_bot_body(self.discord_ws_url), dumps=dumps)
        return web.json_response(DISCORD_UNAUTHORIZED, status=401, dumps=dumps)

    async def stats_page(self, _req: web.Request) -> web.Response:
        body = {**self.stats, "connections": len(self.conns), "sessions": len(self.sessions)}
        return web.json_response(body, dumps=dumps)

    # ------------------------------------------------------------- sends
    async def send_message(self, req: web.Request) -> web.Response:
        target = SEND_TARGETS[req.path.strip("/").split("/")[-3]]
        target_id = req.match_info["id"]
        auth = req.headers.get("Authorization", "")
        platform = "qq" if target != "channel" or auth.startswith("QQBot ") else "discord"
        received = time.monotonic()
        try:
            body = await req.json()
        except ValueError:
            body = None
        status, answer, post = self.send(platform, target, target_id, auth, body)
        when = {"received_ms": int((received - self.started) * 1000), "received_unix_ms": int(time.time() * 1000)}
        if post is not None:
            post.update(platform=platform, target=target, target_id=target_id, **when)
            self.posts.append(post)
        self.attempts.append({"platform": platform, "target": target, "target_id": target_id, "status": status,
                              "recorded": post is not None, "message_id": answer.get("id"), **when})
        self.stats["send_" + str(status)] += 1
        return web.json_response(answer, status=status, dumps=dumps)

    def send(self, platform: str, target: str, target_id: str, auth: str, body: Any) -> tuple[int, dict, dict | None]:
        """Returns (status, answer body, post to record or None)."""
        now = datetime.now(timezone.utc)
        if platform == "discord":
            if not (auth.startswith("Bot ") and self.discord_token_ok(auth[4:])):
                return 401, DISCORD_UNAUTHORIZED, None
            if not isinstance(body, dict):
                return 400, {"code": 50109, "message": "The request body contains invalid JSON."}, None
            content, nonce = body.get("content") or "", body.get("nonce")
            if not isinstance(content, str) or len(content) > DISCORD_MAX_CONTENT:
                return 400, {"code": 50035, "message": "Invalid Form Body", "errors": {"content": {"_errors": [
                    {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}}, None
            if not content and not any(body.get(k) for k in ("embeds", "sticker_ids", "components", "poll")):
                return 400, {"code": 50006, "message": "Cannot send an empty message"}, None
            if isinstance(nonce, bool) or not (nonce is None or isinstance(nonce, int)
                                               or (isinstance(nonce, str) and len(nonce) <= DISCORD_MAX_NONCE)):
                return 400, {"code": 50035, "message": "Invalid Form Body", "errors": {"nonce": {"_errors": [
                    {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 25 or fewer in length."}]}}}, None
            key = (auth, str(nonce))
            t = time.monotonic()
            self.nonces = {k: v for k, v in self.nonces.items() if t - v[0] < DISCORD_NONCE_WINDOW_S}
            if nonce is not None and body.get("enforce_nonce") is True and key in self.nonces:
                return 200, self.nonces[key][1], None
            snowflake = ((int(now.timestamp() * 1000) - DISCORD_EPOCH_MS) << 22) | (len(self.posts) & 0x3FFFFF)
            reply_to = (body.get("message_reference") or {}).get("message_id")
            message = {**DISCORD_MESSAGE, "id": str(snowflake), "channel_id": target_id, "content": content,
                       "timestamp": now.isoformat(), "mentions": [], "type": 19 if reply_to else 0,
                       "author": {"id": "independent-bot", "username": "independent-bot", "bot": True}}
            message.pop("guild_id", None)
            message.pop("member", None)
            if nonce is not None:
                message["nonce"] = nonce
            if nonce is not None and body.get("enforce_nonce") is True:
                self.nonces[key] = (t, message)
            post = {"content": content, "reply_to": reply_to, "msg_seq": None,
                    "nonce": None if nonce is None else str(nonce), "message_id": message["id"]}
            return 200, message, post
        if not auth.startswith("QQBot ") or self.qq_app(auth[6:]) is None:
            return 401, {**QQ_BAD_TOKEN, "trace_id": secrets.token_hex(16)}, None
        invalid = {"code": 12002, "message": "request invalid"}  # v2 openapi/error/error.md RequestInvalid
        empty = {"code": 50006, "message": "message is empty"}  # ... CannotSendEmptyMessage
        if not isinstance(body, dict):
            return 400, invalid, None
        content, msg_id, msg_seq = body.get("content"), body.get("msg_id") or None, body.get("msg_seq")
        if content is not None and not isinstance(content, str) or msg_id is not None and not isinstance(msg_id, str):
            return 400, invalid, None
        if msg_seq is not None and (not isinstance(msg_seq, int) or isinstance(msg_seq, bool) or msg_seq < 0):
            return 400, invalid, None
        if target in ("group", "user"):
            msg_type = body.get("msg_type")
            if not isinstance(msg_type, int) or isinstance(msg_type, bool):
                return 400, invalid, None
            if (target == "group" and content is None) or (msg_type == 0 and not content):
                return 400, empty, None
            if msg_id is not None:  # passive reply: msg_id + msg_seq (default 1) must be new
                key = (msg_id, 1 if msg_seq is None else msg_seq)
                if key in self.replies:
                    return 400, {**QQ_DUPLICATE, "trace_id": secrets.token_hex(16)}, None
                self.replies.add(key)
        elif not content and not any(body.get(k) for k in ("embed", "ark", "image", "markdown")):
            return 400, empty, None
        message_id = f"ROBOT1.0_{secrets.token_hex(12)}"
        if target in ("group", "user"):
            answer = {"id": message_id, "timestamp": int(now.timestamp())}
        else:  # post_messages.md: the Message object
            answer = {**QQ_MESSAGE, "id": message_id, "channel_id": target_id, "content": content or "",
                      "timestamp": now.astimezone(CST).isoformat(timespec="seconds"),
                      "author": {"id": "independent-bot", "username": "independent-bot", "avatar": "", "bot": True}}
            answer.pop("member", None)
            if target == "dm":
                answer["guild_id"] = target_id
        post = {"content": content or "", "reply_to": msg_id, "msg_seq": msg_seq, "nonce": None,
                "message_id": message_id}
        return 200, answer, post

    async def posts_page(self, _req: web.Request) -> web.Response:
        return web.json_response({"posts": self.posts, "attempts": self.attempts}, dumps=dumps)

    @property
    def qq_ws_url(self) -> str:
        return f"{self.public_ws}/websocket"

    @property
    def discord_ws_url(self) -> str:
        return self.public_ws

    @property
    def public_ws(self) -> str:
        return self.args.public_ws or f"ws://127.0.0.1:{self.port}"

    # ----------------------------------------------------------- WebSocket
    async def websocket(self, req: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=not self.args.no_ws_pong, compress=False)
        if not ws.can_prepare(req).ok:
            return web.Response(status=400, text="expected a WebSocket upgrade\n")
        await ws.prepare(req)
        hint = "qq" if req.path.startswith("/websocket") else "discord"
        try:
            version = int(req.query.get("v", "10"))
        except ValueError:
            version = 10
        conn = Conn(ws, hint, version)
        self.conns.add(conn)
        self.stats["ws_connects"] += 1
        writer = asyncio.create_task(self.write_loop(conn))
        conn.send(HELLO, {"heartbeat_interval": self.interval_ms})
        try:
            async for msg in ws:
                if conn.closing:
                    continue
                if msg.type == WSMsgType.TEXT:
                    self.on_text(conn, msg.data)
                elif msg.type == WSMsgType.BINARY:  # we only speak JSON text frames
                    conn.close(4002, "Decode error")
        finally:
            self.conns.discard(conn)
            if conn.closing:
                await asyncio.wait([writer], timeout=15)  # let the close handshake finish
            writer.cancel()
            self.detach(conn, client_code=None if conn.closing else ws.close_code)
        return ws

    async def write_loop(self, conn: Conn) -> None:
        try:
            while True:
                item = await conn.outbox.get()
                if isinstance(item, str):
                    await conn.ws.send_str(item)
                else:
                    await conn.ws.close(code=item[0], message=item[1].encode())
                    return
        except (ConnectionError, RuntimeError):
            pass  # peer went away; the reader side cleans up

    def fail(self, conn: Conn, qq: int, discord: int, reason: str) -> None:
        conn.close(qq if conn.platform == "qq" else discord, reason)

    def on_text(self, conn: Conn, data: str) -> None:
        if conn.platform == "discord" and len(data.encode()) > 4096:
            return conn.close(4002, "Decode error")  # gateway.mdx: payloads over 4096 bytes
        try:
            payload = json.loads(data)
            op = payload["op"]
        except (ValueError, TypeError, KeyError):
            return conn.close(4002, "Decode error")
        if not isinstance(op, int) or isinstance(op, bool):
            return conn.close(4002, "Decode error")
        d = payload.get("d")
        if op == HEARTBEAT:
            conn.last_beat = time.monotonic()
            self.stats["heartbeats"] += 1
            conn.send(HEARTBEAT_ACK)
        elif op in (IDENTIFY, RESUME):
            if conn.session is not None:
                return conn.close(4005, "Already authenticated")
            (self.identify if op == IDENTIFY else self.resume)(conn, d)
        elif conn.session is None:
            conn.close(4003, "Not authenticated")
        elif not (conn.platform == "discord" and op in DISCORD_CLIENT_OPS):
            conn.close(4001, "Unknown opcode")

    def identify(self, conn: Conn, d: Any) -> None:
        token = d.get("token") if isinstance(d, dict) else None
        if not isinstance(token, str):
            return self.fail(conn, 4002, 4001, "Invalid identify payload")
        shard = d.get("shard")
        if shard is not None and not (
            isinstance(shard, list) and len(shard) == 2 and all(isinstance(x, int) for x in shard)
            and 0 <= shard[0] < shard[1]
        ):
            return conn.close(4010, "Invalid shard")
        intents = d.get("intents")
        if token.startswith("QQBot "):
            conn.platform = "qq"
            app_id = self.qq_app(token[6:])
            if app_id is None:  # seen live: op 9 then close 4903 "create session error"
                conn.send(INVALID_SESSION, False)
                return conn.close(4903, "create session error")
            if intents is not None and (not isinstance(intents, int) or intents < 0):
                return conn.close(4013, "invalid intent")
            user = {"id": str(stable_id("qq:" + app_id)), "username": "independent-bot", "bot": True}
            s = self.new_session(str(uuid.uuid4()), "qq", token, app_id, user)
            ready = {"version": 1, "session_id": s.sid, "user": s.user, "shard": shard or [0, 1]}
        else:
            conn.platform = "discord"
            if not self.discord_token_ok(token):
                return conn.close(4004, "Authentication failed.")
            if not isinstance(intents, int) or isinstance(intents, bool) or intents < 0 or intents >= 1 << 26:
                return conn.close(4013, "Invalid intent(s).")
            user_id = str(stable_id("discord:" + token))
            user = {"id": user_id, "username": "independent-bot", "discriminator": "0", "global_name": None,
                    "avatar": None, "bot": True}
            s = self.new_session(uuid.uuid4().hex, "discord", token, user_id, user)
            ready = {"v": conn.version, "user": user, "guilds": [], "session_id": s.sid,
                     "resume_gateway_url": self.discord_ws_url, "application": {"id": user_id, "flags": 0}}
            if shard is not None:
                ready["shard"] = shard
        self.stats["identifies"] += 1
        s.seq = 1
        conn.send(DISPATCH, ready, s=1, t="READY")
        self.attach(s, conn)
        if self.args.dispatch_every_ms:
            s.pump = asyncio.create_task(self.pump(s))

    def new_session(self, sid: str, platform: str, token: str, app_id: str, user: dict) -> Session:
        s = Session(sid, platform, token, app_id, user, self.args.replay_buffer)
        self.sessions[sid] = s
        return s

    def resume(self, conn: Conn, d: Any) -> None:
        ok = isinstance(d, dict) and isinstance(d.get("token"), str) and isinstance(d.get("session_id"), str)
        seq = d.get("seq") if ok else None
        if not ok or not (seq is None or (isinstance(seq, int) and not isinstance(seq, bool))):
            return self.fail(conn, 4002, 4001, "Invalid resume payload")
        seq = seq or 0
        token: str = d["token"]
        conn.platform = "qq" if token.startswith("QQBot ") else "discord"
        s = self.sessions.get(d["session_id"])
        if s is not None and s.platform == "qq":  # the access token may have been refreshed since
            token_ok = self.qq_app(token[6:]) == s.app_id
        else:
            token_ok = s is not None and token == s.token
        if s is None or s.platform != conn.platform or not token_ok or seq < s.evicted:
            self.stats["resume_rejected"] += 1
            return conn.send(INVALID_SESSION, False)
        if seq > s.seq:
            return conn.close(4007, "Invalid seq")
        if s.conn is not None:  # a half-open predecessor: the new socket wins
            old = s.conn
            self.detach(old, client_code=None)
            old.close(4009, "Session timed out")
        replayed = 0
        for n, text in s.buffer:
            if n > seq:
                conn.send_text(text)
                replayed += 1
        s.seq += 1
        resumed = "" if s.platform == "qq" else {"_trace": ["independent-platform"]}
        conn.send(DISPATCH, resumed, s=s.seq, t="RESUMED")
        self.stats["resumes"] += 1
        self.stats["replayed"] += replayed
        self.attach(s, conn)

    def attach(self, s: Session, conn: Conn) -> None:
        if s.expiry is not None:
            s.expiry.cancel()
            s.expiry = None
        s.conn, conn.session = conn, s

    def detach(self, conn: Conn, client_code: int | None) -> None:
        s, conn.session = conn.session, None
        if s is None or s.conn is not conn:
            return
        s.conn = None
        if s.platform == "discord" and client_code in (1000, 1001):  # gateway.mdx: invalidates the session
            self.drop(s)
        else:
            s.expiry = asyncio.get_running_loop().call_later(self.args.session_ttl_s, self.drop, s)

    def drop(self, s: Session) -> None:
        s.conn = None
        if s.pump is not None:
            s.pump.cancel()
        if s.expiry is not None:
            s.expiry.cancel()
        self.sessions.pop(s.sid, None)

    # ---------------------------------------------------------- dispatches
    async def pump(self, s: Session) -> None:
        loop = asyncio.get_running_loop()
        period = self.args.dispatch_every_ms / 1000
        due = loop.time() - period * random.random()  # random phase: sessions don't fire in lockstep
        while True:
            due += period
            if loop.time() - due > period:  # overloaded: skip, don't burst
                due = loop.time()
            await asyncio.sleep(max(0.0, due - loop.time()))
            self.emit(s)

    def emit(self, s: Session) -> None:
        s.seq += 1
        n = s.seq
        now = datetime.now(timezone.utc)
        if s.platform == "qq":
            d = {**QQ_MESSAGE, "id": f"08{secrets.token_hex(20)}", "content": f"<@!{s.user['id']}> ping {n}",
                 "timestamp": now.astimezone(CST).isoformat(timespec="seconds")}
            event_id = f"AT_MESSAGE_CREATE:{secrets.token_hex(16)}"
            payload = {"op": DISPATCH, "s": n, "t": "AT_MESSAGE_CREATE", "id": event_id, "d": d}
        else:
            snowflake = ((int(now.timestamp() * 1000) - DISCORD_EPOCH_MS) << 22) | (n & 0xFFF)
            d = {**DISCORD_MESSAGE, "id": str(snowflake), "content": f"<@{s.user['id']}> ping {n}",
                 "timestamp": now.isoformat(), "mentions": [s.user]}
            payload = {"op": DISPATCH, "d": d, "s": n, "t": "MESSAGE_CREATE"}
        text = dumps(payload)
        if len(s.buffer) == s.buffer.maxlen:
            s.evicted = s.buffer[0][0]
        s.buffer.append((n, text))
        self.stats["dispatched"] += 1
        if s.conn is not None:
            s.conn.send_text(text)

    # -------------------------------------------------------- heartbeats
    async def sweep(self) -> None:
        """Close sockets whose client missed its heartbeat (Discord/QQ close code 4009)."""
        limit = self.interval_ms / 1000 * self.args.heartbeat_timeout_factor
        tick = min(1.0, max(0.05, self.interval_ms / 4000))
        while True:
            await asyncio.sleep(tick)
            deadline = time.monotonic() - limit
            for conn in [c for c in self.conns if not c.closing and c.last_beat < deadline]:
                self.stats["heartbeat_timeouts"] += 1
                conn.close(4009, "Session timed out")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--public-ws", default=None,
                   help="the gateway URLs' base when clients reach it through a front (wss://HOST:PORT)")
    p.add_argument("--heartbeat-interval-ms", type=int, default=41250, help="op 10 heartbeat_interval")
    p.add_argument("--dispatch-every-ms", type=int, default=None, help="per-session test dispatch period")
    p.add_argument("--expected-secret", default=None, help="reject other clientSecrets with code 100016")
    p.add_argument("--discord-token", default=None, help="only accept this Discord bot token")
    p.add_argument("--no-ws-pong", action="store_true", help="do not answer WebSocket ping frames")
    p.add_argument("--heartbeat-timeout-factor", type=float, default=1.5,
                   help="close 4009 after interval*F without op 1; 0 = never")
    p.add_argument("--session-ttl-s", type=float, default=120.0,
                   help="how long a disconnected session stays resumable")
    p.add_argument("--token-ttl-s", type=int, default=7200, help="QQ access_token lifetime")
    p.add_argument("--replay-buffer", type=int, default=10_000, help="dispatches kept per session for Resume")
    return p.parse_args(argv)


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:  # 1,000+ sockets need more than 1024 fds
        resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20 if hard == resource.RLIM_INFINITY else hard, hard))
    plat = Platform(args)
    app = web.Application()
    app.router.add_post("/app/getAppAccessToken", plat.app_access_token)
    app.router.add_get("/gateway", plat.gateway)
    app.router.add_get("/gateway/bot", plat.gateway_bot)
    app.router.add_get("/_independent/stats", plat.stats_page)
    app.router.add_get("/_posts", plat.posts_page)
    for prefix in ("/v2/groups", "/v2/users", "/channels", "/dms"):
        app.router.add_post(prefix + "/{id}/messages", plat.send_message)
    for path in ("/", "/websocket", "/websocket/"):
        app.router.add_get(path, plat.websocket)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, backlog=4096, shutdown_timeout=2.0)
    await site.start()
    plat.port = runner.addresses[0][1]
    print(f"listening http://127.0.0.1:{plat.port}", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sweeper = asyncio.create_task(plat.sweep()) if args.heartbeat_timeout_factor > 0 else None
    await stop.wait()

    if sweeper is not None:
        sweeper.cancel()
    for s in list(plat.sessions.values()):
        plat.drop(s)
    for conn in list(plat.conns):
        conn.close(1001, "server shutting down")
    deadline = loop.time() + 3
    while plat.conns and loop.time() < deadline:
        await asyncio.sleep(0.05)
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
