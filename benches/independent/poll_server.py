#!/usr/bin/env python3
"""Independent Telegram Bot API + Weixin iLink bot API server for the hermes-svc benchmarks.

The two HTTP long-poll platforms, written only from public docs and peers' sources, never from
the project's own mock or client, so that it does not agree with our client by construction.
Sources per behaviour (details and the choices made where nothing is sourced are in README.md):

Telegram  core.telegram.org/bots/api (getUpdates, Update.update_id, setWebhook, deleteWebhook,
            getWebhookInfo, getMe, sendMessage, "Making requests": error object, retry_after,
            method names case-insensitive, query string / urlencoded / JSON / multipart).
          tdlib/telegram-bot-api telegram-bot-api/Client.cpp: process_get_updates_query (webhook
            409, limit 1..100, timeout 0..50, the same-offset 3 s / 0.5 s anti-spin), do_get_updates
            (negative offset, head fallback, one long-poll slot, 1-2 ms batching on wake-up),
            abort_long_poll + fail_query_conflict (409 texts, 3 s pacing), process_set_webhook_query
            (setWebhook 1/s, "Webhook was set / is already set / was deleted / is already deleted",
            secret_token checks); Client.h LONG_POLL_* constants; ClientManager.cpp (401 "invalid
            token specified"); Query.cpp set_retry_after_error (429 body).
          Error texts seen live in clients' code: "Not Found: method not found", "chat_id is empty",
            "message text is empty", "message is too long", "chat not found", "message to be
            replied not found", "unsupported parse_mode", "bad webhook: An HTTPS URL must be
            provided for webhook".
Weixin    Tencent/openclaw-weixin docs/protocol.md, src/api/types.ts, src/api/session-guard.ts
            (endpoints, headers, base_info, get_updates_buf, longpolling_timeout_ms, WeixinMessage,
            MessageItem, SendMessageResp, -14 = session timeout); NousResearch/hermes-agent
            gateway/platforms/weixin.py (client_id per chunk, context_token echo, -2 handling);
            live bodies quoted in users' notes: HTTP 200 {"errcode":-14,"errmsg":"session timeout"}
            for an expired session, a wrong token or missing headers; {"ret":-2,"errmsg":"prepare
            failed"}.

One asyncio loop serves everything; held polls are futures woken by emits, faults and token
changes; a client that disconnects cancels its handler (aiohttp handler_cancellation).
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import html
import itertools
import json
import re
import secrets
import signal
import sys
import time
from http import HTTPStatus
from typing import Any, Awaitable, Callable

from aiohttp import web

TG_MAX_LIMIT, TG_MAX_TIMEOUT = 100, 50  # Client.cpp get_integer_arg bounds, Client.h LONG_POLL_MAX_TIMEOUT
TG_WAIT_AFTER = 0.001  # Client.h LONG_POLL_WAIT_AFTER: batch updates that arrive together
TG_CONFLICT_PACING = 3.0  # Client.cpp fail_query_conflict: at most one immediate 409 per 3 s
TG_MAX_TEXT = 4096
TG_OTHER_POLLER = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
TG_ABORTED = {"conflict": TG_OTHER_POLLER, "setwebhook": "Conflict: terminated by setWebhook request"}
TG_WEBHOOK_ACTIVE = ("Conflict: can't use getUpdates method while webhook is active; "
                     "use deleteWebhook to delete the webhook first")
TG_DEFAULT_ALLOWED = frozenset({"message", "edited_message", "channel_post", "edited_channel_post", "callback_query",
                                "inline_query", "chosen_inline_result", "shipping_query", "pre_checkout_query",
                                "poll", "poll_answer", "my_chat_member", "chat_join_request"})
INT32 = (-(1 << 31), (1 << 31) - 1)
WX_SESSION_TIMEOUT = {"errcode": -14, "errmsg": "session timeout"}
WX_OK = {"ret": 0, "errmsg": ""}
WX_BATCH = 100  # not sourced: most messages one getupdates answer carries
KINDS = {"telegram": {"hang", "conflict", "rate_limit", "server_error", "expire_session", "cursor_reset",
                      "duplicate", "none"},
         "weixin": {"hang", "rate_limit", "server_error", "expire_session", "cursor_reset", "duplicate", "none"}}
DEFAULT_METHODS = {"hang": ["getupdates"], "conflict": ["getupdates"], "rate_limit": ["sendmessage"],
                   "server_error": ["*"], "duplicate": ["getupdates"]}


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def reply(body: Any, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, dumps=dumps)


def to_integer(text: str) -> int:
    """tdlib to_integer: an optional sign and the leading digits; anything else reads as 0."""
    m = re.match(r"\s*(-?\d+)", text)
    return int(m.group(1)) if m else 0


def arg_str(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else dumps(v)


def arg_int(params: dict[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    s = arg_str(params.get(name))
    return max(lo, min(hi, default if s == "" else to_integer(s)))


def arg_json(params: dict[str, Any], name: str) -> Any:
    v = params.get(name)
    if isinstance(v, str) and v:
        try:
            return json.loads(v)
        except ValueError:
            return None
    return v


def arg_bool(params: dict[str, Any], name: str) -> bool:
    return arg_str(params.get(name)).lower() in ("true", "1")


class Fault:
    """One armed fault: `count` is how many matching requests it still hits (None: until cleared)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.kind: str = spec["kind"]
        self.count: int | None = spec.get("count")
        self.methods: list[str] = [m.lower() for m in spec.get("methods") or DEFAULT_METHODS.get(self.kind, [])]
        self.spec = spec

    def hits(self, method: str) -> bool:
        return "*" in self.methods or method in self.methods

    def describe(self) -> dict[str, Any]:
        return {**self.spec, "kind": self.kind, "count": self.count, "methods": self.methods}


class Platform:
    """What both platforms share: faults, tokens, waiters, records."""

    name = ""

    def __init__(self, hub: Hub, token: str) -> None:
        self.hub, self.token = hub, token
        self.revoked: set[str] = set()
        self.fault: Fault | None = None
        self.waiters: set[asyncio.Future[str]] = set()
        self.records: list[dict[str, Any]] = []
        self.by_id: dict[Any, dict[str, Any]] = {}

    def take_fault(self, method: str, kinds: tuple[str, ...]) -> Fault | None:
        f = self.fault
        if f is None or f.kind not in kinds or not f.hits(method):
            return None
        if f.count is not None:
            f.count -= 1
            if f.count <= 0:
                self.fault = None
        self.hub.stats[f"{self.name}_fault_{f.kind}"] += 1
        return f

    def wake(self, why: str = "wake") -> None:
        for fut in list(self.waiters):
            if not fut.done():
                fut.set_result(why)

    async def hold(self, seconds: float, fut: asyncio.Future[str] | None = None) -> str:
        """Wait for a wake-up; returns its reason, or "timeout"."""
        fut = fut or asyncio.get_running_loop().create_future()
        self.waiters.add(fut)
        try:
            return await asyncio.wait_for(fut, timeout=max(0.0, seconds))
        except asyncio.TimeoutError:
            return "timeout"
        finally:
            self.waiters.discard(fut)

    async def hang(self) -> web.Response:
        """Half-open: the request was read and is never answered (until the client goes away)."""
        self.hub.stats[f"{self.name}_hung"] += 1
        never: asyncio.Future[web.Response] = asyncio.get_running_loop().create_future()
        return await never

    def renew_token(self) -> str:
        self.revoked.add(self.token)
        self.token = self.new_token()
        self.wake("auth")
        return self.token

    def new_token(self) -> str:
        raise NotImplementedError

    def arm(self, spec: dict[str, Any]) -> dict[str, Any]:
        self.fault = None if spec["kind"] == "none" else Fault(spec)
        return {"platform": self.name, "fault": self.fault.describe() if self.fault else None}

    def delivered(self, ids: list[Any]) -> None:
        now = self.hub.ms()
        for i in ids:
            rec = self.by_id.get(i)
            if rec is not None:
                rec["deliveries"] += 1
                if rec["first_delivered_ms"] is None:
                    rec["first_delivered_ms"] = now


class Telegram(Platform):
    name = "telegram"

    def __init__(self, hub: Hub, token: str, max_timeout: int) -> None:
        super().__init__(hub, token)
        self.max_timeout = max_timeout
        self.queue: collections.deque[tuple[int, dict[str, Any]]] = collections.deque()  # unconfirmed, ids rising
        self.next_id = 100_000_000 + secrets.randbelow(1 << 20)
        self.reset_to: int | None = None  # cursor_reset: id of the next update once the queue is empty
        self.allowed: frozenset[str] = TG_DEFAULT_ALLOWED
        self.webhook: dict[str, Any] | None = None
        self.next_set_webhook = 0.0
        self.slot: asyncio.Future[str] | None = None  # the one held getUpdates (Client.cpp long_poll_query_)
        self.conflict_at = 0.0
        self.prev_offset, self.prev_start = -1, 0.0
        self.redeliver: list[dict[str, Any]] | None = None
        self.chats: dict[int, dict[str, Any]] = {}  # id -> {"chat", "user", "next_id", "messages"}

    def new_token(self) -> str:
        return f"{self.bot_id}:{secrets.token_urlsafe(26)}"

    @property
    def bot_id(self) -> int:
        return int(self.token.split(":", 1)[0])

    def bot_user(self) -> dict[str, Any]:
        return {"id": self.bot_id, "is_bot": True, "first_name": "Independent Bench", "username": "independent_bench_bot"}

    # ------------------------------------------------------------------ HTTP entry
    async def handle(self, req: web.Request) -> web.StreamResponse:
        token, method = req.match_info["token"], req.match_info["method"].lower()
        self.hub.stats["telegram_requests"] += 1
        if (not token or token[0] == "0" or len(token) > 80 or ":" not in token
                or not 0 < to_integer(token.split(":", 1)[0]) < 1 << 54):
            return self.error(401, "Unauthorized: invalid token specified")
        if token != self.token or token in self.revoked:
            return self.error(401, "Unauthorized")
        handler = self.methods().get(method)
        if handler is None:
            return self.error(404, "Not Found: method not found")
        params = await self.params(req)
        if params is None:
            return self.error(400, "Bad Request: can't parse JSON object")
        fault = self.take_fault(method, ("hang", "conflict", "rate_limit", "server_error"))
        if fault is not None:
            if fault.kind == "hang":
                return await self.hang()
            if fault.kind == "conflict":
                return await self.conflict(TG_OTHER_POLLER)
            if fault.kind == "rate_limit":
                retry = int(fault.spec.get("retry_after", 5))
                return self.error(429, f"Too Many Requests: retry after {retry}", {"retry_after": retry})
            return self.server_error(int(fault.spec.get("status", 500)))
        return await handler(params)

    def methods(self) -> dict[str, Callable[[dict[str, Any]], Awaitable[web.Response]]]:
        return {"getme": self.get_me, "getupdates": self.get_updates, "sendmessage": self.send_message,
                "setwebhook": self.set_webhook, "deletewebhook": self.delete_webhook,
                "getwebhookinfo": self.get_webhook_info, "sendchataction": self.send_chat_action}

    @staticmethod
    async def params(req: web.Request) -> dict[str, Any] | None:
        params: dict[str, Any] = dict(req.query)
        if req.can_read_body:
            if req.content_type == "application/json":
                try:
                    body = await req.json()
                except ValueError:
                    return None
                if not isinstance(body, dict):
                    return None
                params.update(body)
            elif req.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
                form = await req.post()
                params.update({k: v for k, v in form.items() if isinstance(v, str)})
            else:
                await req.read()
        return params

    @staticmethod
    def ok(result: Any, description: str | None = None) -> web.Response:
        body: dict[str, Any] = {"ok": True, "result": result}
        if description:
            body["description"] = description
        return reply(body)

    @staticmethod
    def error(code: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
        body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
        if parameters:
            body["parameters"] = parameters
        return reply(body, status=code)

    @staticmethod
    def server_error(status: int) -> web.Response:
        """500 in the Bot API's JSON; other statuses as the front proxy's HTML page (not sourced: chosen)."""
        if status == 500:
            return Telegram.error(500, "Internal Server Error")
        try:
            title = f"{status} {HTTPStatus(status).phrase}"
        except ValueError:
            title = f"{status} Error"
        page = f"<html><head><title>{title}</title></head><body><center><h1>{title}</h1></center></body></html>"
        return web.Response(status=status, text=page, content_type="text/html")

    async def conflict(self, message: str) -> web.Response:
        """409, but at most one immediately per 3 s; later ones wait 3 s (Client.cpp fail_query_conflict)."""
        self.hub.stats["telegram_409"] += 1
        now = time.monotonic()
        if now >= self.conflict_at:
            self.conflict_at = now + TG_CONFLICT_PACING
        else:
            await asyncio.sleep(TG_CONFLICT_PACING)
        return self.error(409, message)

    # ------------------------------------------------------------------ getUpdates
    def update_allowed(self, params: dict[str, Any]) -> None:
        if arg_str(params.get("allowed_updates")) == "":
            return  # "If not specified, the previous setting will be used."
        value = arg_json(params, "allowed_updates")
        if isinstance(value, list):
            wanted = frozenset(v for v in value if isinstance(v, str))
            self.allowed = wanted if wanted else TG_DEFAULT_ALLOWED

    def take(self, offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """Client.cpp do_get_updates: returns (updates, the offset a held poll keeps using)."""
        while offset < 0 and len(self.queue) > -offset:  # keep the last -offset updates
            self.queue.popleft()
        if offset <= 0:
            offset = self.queue[0][0] if self.queue else self.next_id
        while offset <= self.next_id and self.queue and self.queue[0][0] < offset:  # confirmed
            self.queue.popleft()
        # what is left starts at the offset, or at the head when the offset is "in the future"
        return [u for _, u in itertools.islice(self.queue, limit)], offset

    async def get_updates(self, params: dict[str, Any]) -> web.Response:
        self.hub.stats["telegram_polls"] += 1
        if self.webhook is not None:
            return await self.conflict(TG_WEBHOOK_ACTIVE)
        offset = arg_int(params, "offset", 0, *INT32)
        limit = arg_int(params, "limit", TG_MAX_LIMIT, 1, TG_MAX_LIMIT)
        timeout = arg_int(params, "timeout", 0, 0, self.max_timeout)
        self.update_allowed(params)
        now = time.monotonic()
        if offset == self.prev_offset and timeout < 3 and now < self.prev_start + 3.0:
            timeout = min(3, self.max_timeout)  # Client.cpp: no busy loop on the same offset
        if offset == self.prev_offset and now < self.prev_start + 0.5:
            limit = 1
        self.prev_offset, self.prev_start = offset, now
        updates, offset = self.take(offset, limit)
        if self.redeliver is not None:  # "duplicate": the last batch once more, confirmation ignored
            updates, self.redeliver = self.redeliver, None
            self.delivered([u["update_id"] for u in updates])
            return self.ok(updates)
        if not updates and timeout > 0:
            if self.slot is not None and not self.slot.done():
                self.slot.set_result("conflict")  # abort_long_poll(false): the older poll loses
            self.slot = fut = asyncio.get_running_loop().create_future()
            self.hub.stats["telegram_polls_held"] += 1
            try:
                why = await self.hold(timeout, fut)
            finally:
                if self.slot is fut:
                    self.slot = None
            if why in TG_ABORTED:
                return await self.conflict(TG_ABORTED[why])
            if why == "auth":
                return self.error(401, "Unauthorized")
            if why != "timeout":
                await asyncio.sleep(TG_WAIT_AFTER)
                updates, _ = self.take(offset, limit)
        if updates and self.take_fault("getupdates", ("duplicate",)):
            self.redeliver = list(updates)
        self.delivered([u["update_id"] for u in updates])
        return self.ok(updates)

    def emit(self, n: int, chats: int, text: str | None) -> dict[str, Any]:
        out, dropped = [], 0
        for _ in range(n):
            k = len(self.records) % max(1, chats)
            chat = self.chat(k)
            mid = chat["next_id"]
            chat["next_id"] += 1
            message = {"message_id": mid, "from": chat["user"], "chat": chat["chat"], "date": int(time.time()),
                       "text": text if text is not None else f"ping {len(self.records) + 1}"}
            rec: dict[str, Any] = {"update_id": None, "chat_id": chat["chat"]["id"], "message_id": mid,
                                   "text": message["text"], "created_ms": self.hub.ms(), "deliveries": 0,
                                   "first_delivered_ms": None, "dropped": "message" not in self.allowed}
            self.records.append(rec)
            chat["messages"][mid] = message
            if rec["dropped"]:  # allowed_updates filters when an update is created
                dropped += 1
                continue
            if not self.queue and self.reset_to is not None:
                self.next_id, self.reset_to = self.reset_to, None
            uid = self.next_id
            self.next_id += 1
            rec["update_id"] = uid
            self.by_id[uid] = rec
            self.queue.append((uid, {"update_id": uid, "message": message}))
            out.append({"update_id": uid, "chat_id": chat["chat"]["id"], "message_id": mid})
        if out and self.slot is not None and not self.slot.done():
            self.slot.set_result("wake")
        return {"platform": "telegram", "updates": out, "dropped": dropped}

    def arm(self, spec: dict[str, Any]) -> dict[str, Any]:
        answer = super().arm(spec)
        if spec["kind"] == "conflict" and self.slot is not None and not self.slot.done():
            if self.take_fault("getupdates", ("conflict",)):  # as when another poller's request arrives
                self.slot.set_result("conflict")
        return answer

    def chat(self, k: int) -> dict[str, Any]:
        cid = 500_000_001 + k
        if cid not in self.chats:
            user = {"id": cid, "is_bot": False, "first_name": f"Bench{k}", "username": f"bench_user_{k}",
                    "language_code": "en"}
            chat = {"id": cid, "first_name": user["first_name"], "username": user["username"], "type": "private"}
            self.chats[cid] = {"chat": chat, "user": user, "next_id": 1, "messages": {}}
        return self.chats[cid]

    # ------------------------------------------------------------------ other methods
    async def get_me(self, _params: dict[str, Any]) -> web.Response:
        return self.ok({**self.bot_user(), "can_join_groups": True, "can_read_all_group_messages": False,
                        "supports_inline_queries": False, "can_connect_to_business": False,
                        "has_main_web_app": False})

    async def send_chat_action(self, params: dict[str, Any]) -> web.Response:
        if self.find_chat(arg_str(params.get("chat_id"))) is None:
            return self.error(400, "Bad Request: chat not found")
        return self.ok(True)

    def find_chat(self, raw: str) -> dict[str, Any] | None:
        if raw.startswith("@"):
            return next((c for c in self.chats.values() if c["chat"]["username"] == raw[1:]), None)
        return self.chats.get(to_integer(raw))

    async def send_message(self, params: dict[str, Any]) -> web.Response:
        status, answer, post = self.check_send(params)
        when = self.hub.when()
        if post is not None:
            self.hub.posts.append({"platform": "telegram", **post, **when})
        self.hub.attempts.append({"platform": "telegram", "method": "sendMessage", "status": status,
                                  "recorded": post is not None, **when})
        if status != 200:
            return self.error(status, answer)
        return self.ok(answer)

    def check_send(self, params: dict[str, Any]) -> tuple[int, Any, dict[str, Any] | None]:
        raw_chat = arg_str(params.get("chat_id"))
        if raw_chat == "":
            return 400, "Bad Request: chat_id is empty", None
        text, mode = arg_str(params.get("text")), arg_str(params.get("parse_mode"))
        if mode not in ("", "HTML", "Markdown", "MarkdownV2"):
            return 400, "Bad Request: unsupported parse_mode", None
        shown = html.unescape(re.sub(r"<[^>]*>", "", text)) if mode == "HTML" else text
        if not shown.strip():
            return 400, "Bad Request: message text is empty", None
        if len(shown.encode("utf-16-le")) // 2 > TG_MAX_TEXT:
            return 400, "Bad Request: message is too long", None
        chat = self.find_chat(raw_chat)
        if chat is None:
            return 400, "Bad Request: chat not found", None
        rp = arg_json(params, "reply_parameters")
        if isinstance(rp, dict):
            reply_to, lenient = to_integer(arg_str(rp.get("message_id"))), arg_bool(rp, "allow_sending_without_reply")
        else:
            reply_to = to_integer(arg_str(params.get("reply_to_message_id")))
            lenient = arg_bool(params, "allow_sending_without_reply")
        target = chat["messages"].get(reply_to) if reply_to else None
        if reply_to and target is None and not lenient:
            return 400, "Bad Request: message to be replied not found", None
        mid = chat["next_id"]
        chat["next_id"] += 1
        message: dict[str, Any] = {"message_id": mid, "from": self.bot_user(), "chat": chat["chat"],
                                   "date": int(time.time()), "text": shown}
        if target is not None:
            message["reply_to_message"] = target
        chat["messages"][mid] = {k: v for k, v in message.items() if k != "reply_to_message"}
        post = {"chat_id": chat["chat"]["id"], "message_id": mid, "text": text, "parse_mode": mode or None,
                "reply_to": reply_to if target is not None else None}
        return 200, message, post

    async def set_webhook(self, params: dict[str, Any]) -> web.Response:
        url = arg_str(params.get("url"))
        if url == "":
            return await self.delete_webhook(params)
        now = time.monotonic()
        if now < self.next_set_webhook:
            return self.error(429, "Too Many Requests: retry after 1", {"retry_after": 1})
        self.next_set_webhook = now + 1
        secret = arg_str(params.get("secret_token"))
        conf = {"url": url, "max_connections": arg_int(params, "max_connections", 40, 1, 100), "secret": secret}
        drop = arg_bool(params, "drop_pending_updates")
        if self.webhook == conf and not drop:
            self.update_allowed(params)
            return self.ok(True, "Webhook is already set")
        if not re.match(r"^https://[^/\s]+", url, re.I):
            return self.error(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        if len(secret) > 256:
            return self.error(400, "Bad Request: secret token is too long")
        if not re.fullmatch(r"[A-Za-z0-9_-]*", secret):
            return self.error(400, "Bad Request: secret token contains unallowed characters")
        if self.slot is not None and not self.slot.done():
            self.slot.set_result("setwebhook")
        if drop:
            self.queue.clear()
        self.update_allowed(params)
        self.webhook = conf  # recorded only: this server never delivers to it
        return self.ok(True, "Webhook was set")

    async def delete_webhook(self, params: dict[str, Any]) -> web.Response:
        if arg_bool(params, "drop_pending_updates"):
            self.queue.clear()
        was_set, self.webhook = self.webhook is not None, None
        return self.ok(True, "Webhook was deleted" if was_set else "Webhook is already deleted")

    async def get_webhook_info(self, _params: dict[str, Any]) -> web.Response:
        info: dict[str, Any] = {"url": self.webhook["url"] if self.webhook else "", "has_custom_certificate": False,
                                "pending_update_count": len(self.queue)}
        if self.webhook:
            info["max_connections"] = self.webhook["max_connections"]
        if self.allowed != TG_DEFAULT_ALLOWED:
            info["allowed_updates"] = sorted(self.allowed)
        return self.ok(info)


class Weixin(Platform):
    name = "weixin"

    def __init__(self, hub: Hub, token: str, poll_ms: int) -> None:
        super().__init__(hub, token)
        self.poll_ms = poll_ms
        self.bot_id = f"{secrets.token_hex(6)}@im.bot"
        self.log: list[dict[str, Any]] = []  # every message; a cursor is an index into it
        self.epoch = secrets.token_hex(4)  # a cursor_reset starts a new epoch: older cursors mean nothing
        self.acked = 0  # the highest cursor a client has presented in this epoch
        self.next_message_id = (7 << 60) + secrets.randbelow(1 << 40)  # uint64 above 2**53
        self.issued: dict[str, set[str]] = {}  # user id -> context tokens handed out with its messages
        self.client_ids: set[str] = set()
        self.redeliver: tuple[list[dict[str, Any]], str] | None = None

    def new_token(self) -> str:
        return f"{secrets.token_hex(16)}@im.bot:{secrets.token_urlsafe(24)}"

    def cursor(self, pos: int) -> str:
        return base64.b64encode(f"independent:{self.epoch}:{pos}".encode()).decode()

    def position(self, buf: str) -> int:
        """A cursor of this epoch confirms what lies before it; anything else reads from the last confirmed."""
        try:
            tag, epoch, pos = base64.b64decode(buf, validate=True).decode().split(":")
            n = int(pos)
        except (ValueError, UnicodeDecodeError):
            return self.acked
        if tag != "independent" or epoch != self.epoch or not 0 <= n <= len(self.log):
            return self.acked
        self.acked = max(self.acked, n)
        return n

    def authorized(self, req: web.Request) -> bool:
        uin = req.headers.get("X-WECHAT-UIN", "")
        try:
            digits = base64.b64decode(uin, validate=True).decode("ascii")
        except (ValueError, UnicodeDecodeError):
            return False
        return (req.headers.get("AuthorizationType") == "ilink_bot_token" and digits.isdigit()
                and int(digits) < 1 << 32 and req.headers.get("Authorization") == f"Bearer {self.token}"
                and self.token not in self.revoked)

    async def handle(self, req: web.Request) -> web.StreamResponse:
        endpoint = req.match_info["endpoint"].lower()
        self.hub.stats["weixin_requests"] += 1
        try:
            body = json.loads(await req.text() or "null")
        except ValueError:
            body = None
        if not self.authorized(req):
            return self.session_timeout()
        fault = self.take_fault(endpoint, ("hang", "rate_limit", "server_error"))
        if fault is not None:
            if fault.kind == "hang":
                return await self.hang()
            if fault.kind == "rate_limit":
                return reply({"ret": -2, "errmsg": str(fault.spec.get("errmsg", "prepare failed"))})
            status = int(fault.spec.get("status", 500))
            return web.Response(status=status, text=f"{status} error\n")
        if not isinstance(body, dict):
            return reply({"ret": -1, "errmsg": "invalid request body"}, status=400)
        if endpoint == "getupdates":
            return await self.get_updates(req, body)
        if endpoint == "sendmessage":
            return self.send_message(body)
        if endpoint == "getconfig":
            return reply({**WX_OK, "typing_ticket": base64.b64encode(secrets.token_bytes(24)).decode()})
        return reply(WX_OK)  # sendtyping, msg/notifystart, msg/notifystop

    def session_timeout(self) -> web.Response:
        self.hub.stats["weixin_session_timeout"] += 1
        shape = self.hub.weixin_shape
        body = {"ret": -14, "errmsg": "session timeout"} if shape == "ret" else dict(WX_SESSION_TIMEOUT)
        if shape == "both":
            body["ret"] = -14
        return reply(body)

    async def get_updates(self, req: web.Request, body: dict[str, Any]) -> web.Response:
        self.hub.stats["weixin_polls"] += 1
        buf = body.get("get_updates_buf") or body.get("sync_buf") or ""
        start = self.position(buf if isinstance(buf, str) else "")
        epoch = self.epoch
        if self.redeliver is not None:
            (msgs, cursor), self.redeliver = self.redeliver, None
            return self.answer(msgs, cursor)
        deadline = time.monotonic() + self.poll_ms / 1000
        self.hub.stats["weixin_polls_held"] += not self.log[start:]
        while True:
            if not self.authorized(req):
                return self.session_timeout()
            if epoch != self.epoch:  # a cursor_reset while held: this cursor is now unknown
                start, epoch = self.acked, self.epoch
            msgs = self.log[start:start + WX_BATCH]
            if msgs:
                cursor = self.cursor(start + len(msgs))
                if self.take_fault("getupdates", ("duplicate",)):
                    self.redeliver = (msgs, cursor)
                return self.answer(msgs, cursor)
            left = deadline - time.monotonic()
            if left <= 0:
                return self.answer([], self.cursor(start))
            await self.hold(left)

    def answer(self, msgs: list[dict[str, Any]], cursor: str) -> web.Response:
        self.delivered([m["message_id"] for m in msgs])
        return reply({"ret": 0, "msgs": msgs, "get_updates_buf": cursor, "longpolling_timeout_ms": self.poll_ms})

    def send_message(self, body: dict[str, Any]) -> web.Response:
        msg = body.get("msg")
        when = self.hub.when()
        status, answer, post = 200, dict(WX_OK), None
        items = msg.get("item_list") if isinstance(msg, dict) else None
        if not isinstance(msg, dict) or not msg.get("to_user_id") or not isinstance(items, list) or not items:
            status, answer = 400, {"ret": -1, "errmsg": "msg needs to_user_id and item_list"}
        else:
            client_id = msg.get("client_id")
            duplicate = isinstance(client_id, str) and client_id in self.client_ids
            if isinstance(client_id, str) and client_id:
                self.client_ids.add(client_id)
            if not duplicate:
                to, ctx = str(msg["to_user_id"]), msg.get("context_token")
                text = "".join(str((i.get("text_item") or {}).get("text") or "") for i in items if isinstance(i, dict))
                post = {"platform": "weixin", "to_user_id": to, "client_id": client_id, "context_token": ctx,
                        "context_known": ctx in self.issued.get(to, ()), "text": text,
                        "item_types": [i.get("type") for i in items if isinstance(i, dict)],
                        "message_type": msg.get("message_type"), "message_state": msg.get("message_state"),
                        "channel_version": (body.get("base_info") or {}).get("channel_version"), **when}
                self.hub.posts.append(post)
        client = msg.get("client_id") if isinstance(msg, dict) else None
        self.hub.attempts.append({"platform": "weixin", "method": "sendmessage", "status": status,
                                  "recorded": post is not None, "client_id": client, **when})
        return reply(answer, status=status)

    def emit(self, n: int, users: int, text: str | None) -> dict[str, Any]:
        out = []
        for _ in range(n):
            k = len(self.log) % max(1, users)
            user = f"o9cq80{k:06d}bench@im.wechat"
            mid = self.next_message_id
            self.next_message_id += 1 + secrets.randbelow(1000)
            now = int(time.time() * 1000)
            ctx = base64.b64encode(secrets.token_bytes(48)).decode()
            self.issued.setdefault(user, set()).add(ctx)
            body = text if text is not None else f"ping {len(self.log) + 1}"
            message = {"seq": len(self.log) + 1, "message_id": mid, "from_user_id": user, "to_user_id": self.bot_id,
                       "client_id": f"wx-{secrets.token_hex(8)}", "create_time_ms": now, "update_time_ms": now,
                       "session_id": "", "message_type": 1, "message_state": 2, "context_token": ctx,
                       "item_list": [{"type": 1, "create_time_ms": now, "text_item": {"text": body}}]}
            self.log.append(message)
            rec = {"message_id": mid, "seq": message["seq"], "from_user_id": user, "text": body,
                   "created_ms": self.hub.ms(), "deliveries": 0, "first_delivered_ms": None}
            self.records.append(rec)
            self.by_id[mid] = rec
            out.append({"message_id": mid, "seq": message["seq"], "from_user_id": user})
        self.wake()
        return {"platform": "weixin", "messages": out}


class Hub:
    """The two platforms, the shared records and the control routes."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.started = time.monotonic()
        self.stats: collections.Counter[str] = collections.Counter()
        self.posts: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.weixin_shape = "errcode"
        self.telegram = Telegram(self, args.telegram_token, args.max_telegram_timeout)
        self.weixin = Weixin(self, args.weixin_token, args.weixin_poll_timeout_ms)

    def ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def when(self) -> dict[str, int]:
        return {"received_ms": self.ms(), "received_unix_ms": int(time.time() * 1000)}

    def platform(self, req: web.Request) -> Platform:
        name = req.match_info["platform"]
        if name not in KINDS:
            raise web.HTTPNotFound(text=f"unknown platform {name!r}\n")
        return self.telegram if name == "telegram" else self.weixin

    async def emit(self, req: web.Request) -> web.Response:
        plat = self.platform(req)
        q = req.query
        try:
            n, spread = int(q.get("n", "1")), int(q.get("chats", q.get("users", "1")))
        except ValueError:
            return reply({"error": "n, chats and users are integers"}, status=400)
        if not 0 <= n <= 100_000 or spread < 1:
            return reply({"error": "0 <= n <= 100000 and chats/users >= 1"}, status=400)
        if plat is self.weixin:
            return reply(self.weixin.emit(n, spread, q.get("text")))
        return reply(self.telegram.emit(n, spread, q.get("text")))

    async def fault(self, req: web.Request) -> web.Response:
        plat = self.platform(req)
        if req.method == "GET":
            return reply({"platform": plat.name, "fault": plat.fault.describe() if plat.fault else None})
        try:
            spec = await req.json()
        except ValueError:
            spec = None
        kind = spec.get("kind") if isinstance(spec, dict) else None
        if kind not in KINDS[plat.name]:
            return reply({"error": f"kind is one of {sorted(KINDS[plat.name])} on {plat.name}"}, status=400)
        count, methods = spec.get("count"), spec.get("methods")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
            return reply({"error": "count is a positive integer or absent"}, status=400)
        if methods is not None and not (isinstance(methods, list) and all(isinstance(m, str) for m in methods)):
            return reply({"error": "methods is a list of method names"}, status=400)
        if kind == "expire_session":  # immediate: the current token dies; /_control/<p>/token issues another
            if plat is self.weixin:
                self.weixin_shape = spec.get("shape", "errcode") if spec.get("shape") in ("ret", "both") else "errcode"
            plat.revoked.add(plat.token)
            plat.wake("auth")
            return reply({"platform": plat.name, "expired": True, "fault": None})
        if kind == "cursor_reset":
            if plat is self.telegram:
                uid = spec.get("update_id")
                self.telegram.reset_to = uid if isinstance(uid, int) and uid > 0 else 1 + secrets.randbelow(INT32[1] - 1)
                return reply({"platform": "telegram", "next_update_id_after_drain": self.telegram.reset_to})
            self.weixin.epoch, self.weixin.acked = secrets.token_hex(4), 0
            self.weixin.redeliver = None
            self.weixin.wake("reset")
            return reply({"platform": "weixin", "epoch": self.weixin.epoch, "redelivers_from_seq": 1})
        return reply(plat.arm(spec))

    async def token(self, req: web.Request) -> web.Response:
        plat = self.platform(req)
        return reply({"platform": plat.name, "token": plat.renew_token()})

    async def updates(self, _req: web.Request) -> web.Response:
        return reply({"telegram": self.telegram.records, "weixin": self.weixin.records})

    async def posts_page(self, _req: web.Request) -> web.Response:
        return reply({"posts": self.posts, "attempts": self.attempts})

    async def stats_page(self, _req: web.Request) -> web.Response:
        return reply({**self.stats, "telegram_pending": len(self.telegram.queue), "weixin_log": len(self.weixin.log)})


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--telegram-token", default="7000000001:AAindependent-poll-server-telegram",
                   help="the one bot token /bot<TOKEN>/ accepts")
    p.add_argument("--weixin-token", default="independent-weixin-bot-token", help="the iLink bot_token accepted")
    p.add_argument("--weixin-poll-timeout-ms", type=int, default=35_000,
                   help="how long getupdates is held, and the longpolling_timeout_ms it advertises")
    p.add_argument("--max-telegram-timeout", type=int, default=TG_MAX_TIMEOUT,
                   help="cap on getUpdates timeout in seconds (the Bot API server's is 50)")
    args = p.parse_args(argv)
    bot_id = to_integer(args.telegram_token.split(":", 1)[0])
    if ":" not in args.telegram_token or not 0 < bot_id < 1 << 54 or args.telegram_token[0] == "0":
        p.error("--telegram-token must look like <bot id>:<secret>")
    if args.weixin_poll_timeout_ms < 1 or args.max_telegram_timeout < 0:
        p.error("timeouts must be positive")
    return args


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    hub = Hub(args)
    app = web.Application()
    app.router.add_route("*", "/bot{token}/{method}", hub.telegram.handle)
    app.router.add_post("/ilink/bot/{endpoint:getupdates|sendmessage|getconfig|sendtyping|msg/notifystart|"
                        "msg/notifystop}", hub.weixin.handle)
    app.router.add_post("/_control/{platform}/emit", hub.emit)
    app.router.add_route("*", "/_control/{platform}/fault", hub.fault)
    app.router.add_post("/_control/{platform}/token", hub.token)
    app.router.add_get("/_updates", hub.updates)
    app.router.add_get("/_posts", hub.posts_page)
    app.router.add_get("/_independent/stats", hub.stats_page)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True,
                           shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, backlog=4096)
    await site.start()
    print(f"listening http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
