#!/usr/bin/env python3
"""Independent Matrix homeserver stand-in (Client-Server API subset) for the hermes-svc benchmarks.

Written only from docs/research/matrix-client-server.md and the Matrix spec (matrix-org/matrix-spec
data/api/client-server/{sync,message_pagination,room_send}.yaml and definitions/{event_filter,
room_event_filter,timeline_batch}.yaml; the content repository, in matrix_media.py, from content-repo.yaml and
authed-content-repo.yaml), never from the project's own mock or client, so that it does
not agree with our client by construction. It imitates Synapse where the note describes Synapse. The
source of each behaviour, and the choices made where the note says "not confirmed", are in README.md
("Matrix client-server (matrix_server.py)").

One asyncio loop serves everything. The event log is one global stream (positions 1, 2, ...); every
token (sync next_batch, timeline prev_batch, /messages start/end) encodes a position in it, wrapped in
a Synapse-like multi-part string with a random offset so that a client cannot read anything into it.
Held /sync requests are futures woken by new events and by revocation; a client that goes away cancels
its handler (aiohttp handler_cancellation).
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import collections
import email.utils
import json
import math
import os
import re
import secrets
import signal
import sys
import time
from typing import Any

from aiohttp import web

import matrix_media  # beside this file: the content repository (issue 47)

SPEC_VERSIONS = ["r0.0.1", "r0.1.0", "r0.2.0", "r0.3.0", "r0.4.0", "r0.5.0", "r0.6.0", "r0.6.1", "v1.1", "v1.2",
                 "v1.3", "v1.4", "v1.5", "v1.6", "v1.7", "v1.8", "v1.9", "v1.10", "v1.11"]
DEFAULT_TIMELINE_LIMIT = 10  # note §3: Synapse filter_json.get("limit", 10)
MAX_TIMELINE_LIMIT = 100  # note §3: capped at filter_timeline_limit (value recalled as 100, unconfirmed)
MESSAGES_DEFAULT_LIMIT, MESSAGES_MAX_LIMIT = 10, 1000  # message_pagination.yaml "Default: 10"; cap chosen
SYNC_FAULTS = ("hang", "half_body", "429", "5xx", "unknown_token", "repeat_batch", "invalid_since")
POST_FAULTS = ("429", "500", "reset_after", "hang_after", "slow")
PRESENCE = ("offline", "online", "unavailable")
MEGOLM = "m.megolm.v1.aes-sha2"
STAT_KEYS = ("syncs", "initial_syncs", "syncs_answered", "syncs_held", "syncs_early", "syncs_timed_out",
             "repeated_batches", "hung", "half_bodies", "refused", "limited", "messages_requests",
             "messages_empty_pages", "sends", "sends_accepted", "sends_refused", "sends_reset", "sends_hung",
             "txn_hits", "txn_waits", "events", "faults_fired", "whoami", "state_requests", "filters_uploaded")
HTML_PAGE = ("<html>\r\n<head><title>{code} {reason}</title></head>\r\n<body>\r\n<center><h1>{code} {reason}"
             "</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
REASONS = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Temporarily Unavailable",
           504: "Gateway Time-out"}


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def reply(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, dumps=dumps, headers=headers)


def mx_error(status: int, errcode: str, error: str, headers: dict[str, str] | None = None,
             **extra: Any) -> web.Response:
    """[spec] §Standard error response: errcode and error are always present."""
    return reply({"errcode": errcode, "error": error, **extra}, status, headers)


def b64(n: int) -> str:
    return base64.b64encode(os.urandom(n)).decode().rstrip("=")


def new_event_id() -> str:
    """Room versions >= 4: '$' + unpadded url-safe base64 of a 32-byte hash, no server name."""
    return "$" + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


class BadFilter(Exception):
    def __init__(self, errcode: str, error: str) -> None:
        super().__init__(error)
        self.errcode, self.error = errcode, error


def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile("^" + ".*".join(re.escape(p) for p in pattern.split("*")) + "$")


def _str_list(d: dict[str, Any], key: str) -> list[str] | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise BadFilter("M_BAD_JSON", f"'{key}' must be a list of strings")
    return v


class EventFilter:
    """EventFilter / RoomEventFilter (event_filter.yaml, room_event_filter.yaml): a missing list means all,
    `*` is a wildcard, and not_* wins over the inclusion list."""

    def __init__(self, d: Any, default_limit: int | None = None) -> None:
        if d is None:
            d = {}
        if not isinstance(d, dict):
            raise BadFilter("M_BAD_JSON", "an event filter must be a JSON object")
        self.types = [_glob(t) for t in _str_list(d, "types") or []] if d.get("types") is not None else None
        self.not_types = [_glob(t) for t in _str_list(d, "not_types") or []]
        self.senders = _str_list(d, "senders")
        self.not_senders = _str_list(d, "not_senders") or []
        self.rooms = _str_list(d, "rooms")
        self.not_rooms = _str_list(d, "not_rooms") or []
        limit = d.get("limit", default_limit)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise BadFilter("M_BAD_JSON", "'limit' must be an integer greater than 0")
        self.limit = limit

    def room_ok(self, room: str) -> bool:
        return room not in self.not_rooms and (self.rooms is None or room in self.rooms)

    def allows(self, ev: "Event") -> bool:
        if any(p.match(ev.type) for p in self.not_types) or ev.sender in self.not_senders:
            return False
        if self.types is not None and not any(p.match(ev.type) for p in self.types):
            return False
        if self.senders is not None and ev.sender not in self.senders:
            return False
        return self.room_ok(ev.room)


class SyncFilter:
    """The sync Filter (sync_filter.yaml): only `room` matters here, because this server never has presence,
    account data or ephemeral events to send."""

    def __init__(self, d: Any) -> None:
        if not isinstance(d, dict):
            raise BadFilter("M_BAD_JSON", "a filter must be a JSON object")
        room = d.get("room") or {}
        if not isinstance(room, dict):
            raise BadFilter("M_BAD_JSON", "'room' must be an object")
        self.rooms = _str_list(room, "rooms")
        self.not_rooms = _str_list(room, "not_rooms") or []
        self.timeline = EventFilter(room.get("timeline"), DEFAULT_TIMELINE_LIMIT)
        self.state = EventFilter(room.get("state"))
        self.limit = min(self.timeline.limit or DEFAULT_TIMELINE_LIMIT, MAX_TIMELINE_LIMIT)

    def room_ok(self, room: str) -> bool:
        return room not in self.not_rooms and (self.rooms is None or room in self.rooms)


class Event:
    __slots__ = ("pos", "room", "event_id", "type", "sender", "ts", "content", "state_key", "txn_id",
                 "device_id", "source")

    def __init__(self, pos: int, room: str, etype: str, sender: str, content: dict[str, Any], ts: int,
                 state_key: str | None = None, txn_id: str | None = None, device_id: str | None = None,
                 source: str = "emit") -> None:
        self.pos, self.room, self.type, self.sender, self.content, self.ts = pos, room, etype, sender, content, ts
        self.event_id, self.state_key, self.txn_id, self.device_id = new_event_id(), state_key, txn_id, device_id
        self.source = source

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"pos": self.pos, "room": self.room, "sender": self.sender, "type": self.type,
                             "event_id": self.event_id, "origin_server_ts": self.ts, "source": self.source}
        if self.state_key is not None:
            d["state_key"] = self.state_key
        if isinstance(self.content.get("body"), str):
            d["body"] = self.content["body"]
        if self.txn_id is not None:
            d["txn_id"] = self.txn_id
        return d


class Rate:
    """The most requests seen in any 1-second window, and the recent request times."""

    def __init__(self) -> None:
        self.window: collections.deque[float] = collections.deque()
        self.max = 0
        self.recent_ms: collections.deque[int] = collections.deque(maxlen=2000)

    def hit(self, now: float, ms: int) -> None:
        self.window.append(now)
        while self.window[0] <= now - 1.0:
            self.window.popleft()
        self.max = max(self.max, len(self.window))
        self.recent_ms.append(ms)


class Homeserver:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.user_id, self.device_id, self.token = args.user_id, args.device_id, args.access_token
        self.server_name = args.user_id.split(":", 1)[1]
        self.peer = args.peer_user or f"@alice:{self.server_name}"
        self.started = time.monotonic()
        self.stats: collections.Counter[str] = collections.Counter({k: 0 for k in STAT_KEYS})
        self.sync_rate, self.send_rate = Rate(), Rate()
        self.live_syncs = 0
        self.last_presence: str | None = None
        # Tokens: s<BASE+pos>_<P>_0_<R>_1_1_<D>_0. BASE, P, R and D are random per run.
        self.base = 10_000 + secrets.randbelow(80_000)
        self.tail = f"_{1000 + secrets.randbelow(9000)}_0_{100 + secrets.randbelow(9000)}_1_1_{secrets.randbelow(500)}_0"
        self.log: list[Event] = []
        self.rooms: dict[str, list[Event]] = {r: [] for r in args.rooms}
        self.room_pos: dict[str, list[int]] = {r: [] for r in args.rooms}
        self.room_state_evs: dict[str, list[Event]] = {r: [] for r in args.rooms}
        self.waiters: set[asyncio.Future[str]] = set()
        self.txns: dict[tuple[str, str, str, str], asyncio.Future[tuple[int, Any, dict[str, str], str | None]]] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.filters: list[Any] = []
        self.posts: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.last_ts = 0
        self.emitted = 0
        self.revoked = False
        self.revoked_soft = False
        self.sync_fault: dict[str, Any] | None = None
        self.post_fault: dict[str, Any] | None = None
        self.messages_opts: dict[str, Any] = {"empty_pages": 0, "lazy_end": False}
        self.media = matrix_media.MediaRepo(self, args.media_dir, args.max_upload_bytes)
        for room in args.rooms:
            self.seed_room(room, room in args.encrypted_rooms)

    # ------------------------------------------------------------------ basics
    def ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def when(self) -> dict[str, int]:
        """When a request was handled: ms since start, and Unix time in ms and (for latency figures) in µs."""
        now = time.time()
        return {"received_ms": self.ms(), "received_unix_ms": int(now * 1000), "received_unix_us": int(now * 1e6)}

    def now_ts(self) -> int:
        self.last_ts = max(int(time.time() * 1000), self.last_ts)
        return self.last_ts

    @property
    def head(self) -> int:
        return len(self.log)

    def append(self, room: str, etype: str, sender: str, content: dict[str, Any], state_key: str | None = None,
               txn_id: str | None = None, device_id: str | None = None, source: str = "emit") -> Event:
        ev = Event(self.head + 1, room, etype, sender, content, self.now_ts(), state_key, txn_id, device_id, source)
        self.log.append(ev)
        self.rooms[room].append(ev)
        self.room_pos[room].append(ev.pos)
        if state_key is not None:
            self.room_state_evs[room].append(ev)
        if etype == "m.room.message":
            self.media.note_event(ev)
        self.stats["events"] += 1
        self.wake("event")
        return ev

    def wake(self, why: str) -> None:
        for fut in list(self.waiters):
            if not fut.done():
                fut.set_result(why)

    async def wait(self, seconds: float) -> str:
        fut = asyncio.get_running_loop().create_future()
        self.waiters.add(fut)
        try:
            return await asyncio.wait_for(fut, timeout=max(0.0, seconds))
        except asyncio.TimeoutError:
            return "timeout"
        finally:
            self.waiters.discard(fut)

    def seed_room(self, room: str, encrypted: bool) -> None:
        """A room the peer created and invited the bot to; the bot joined (stream order = creation order)."""
        p = self.peer
        self.append(room, "m.room.create", p, {"room_version": "10", "creator": p}, "", source="seed")
        self.append(room, "m.room.member", p, {"membership": "join", "displayname": p[1:].split(":")[0]}, p,
                    source="seed")
        self.append(room, "m.room.power_levels", p, {"users": {p: 100}, "users_default": 0, "events_default": 0,
                                                     "state_default": 50}, "", source="seed")
        self.append(room, "m.room.join_rules", p, {"join_rule": "invite"}, "", source="seed")
        self.append(room, "m.room.history_visibility", p, {"history_visibility": "shared"}, "", source="seed")
        self.append(room, "m.room.member", self.user_id, {"membership": "join", "displayname": "bot"}, self.user_id,
                    source="seed")
        if encrypted:
            self.encrypt(room)

    def encrypt(self, room: str) -> Event:
        content = {"algorithm": MEGOLM, "rotation_period_ms": 604800000, "rotation_period_msgs": 100}
        return self.append(room, "m.room.encryption", self.peer, content, "", source="encrypt")

    # ------------------------------------------------------------------ tokens
    def stream_token(self, pos: int) -> str:
        return f"s{self.base + pos}{self.tail}"

    def topo_token(self, room: str, pos: int) -> str:
        depth = bisect.bisect_right(self.room_pos[room], pos) + 2  # decorative, like Synapse's topological part
        return f"t{depth}-{self.base + pos}{self.tail}"

    def parse_token(self, tok: str) -> int | None:
        """A position in the stream, or None for a token this server never issued. A token ahead of the
        stream is clamped to the head (Synapse bound_future_token)."""
        m = re.fullmatch(r"(?:s(\d{1,15})|t\d{1,15}-(\d{1,15}))((?:_\d{1,15}){7})", tok)
        if m is None:
            return None
        pos = int(m.group(1) or m.group(2)) - self.base
        if pos < 0:
            return None
        return min(pos, self.head)

    # ------------------------------------------------------------------ auth
    def auth(self, req: web.Request) -> web.Response | None:
        """[spec] §Using access tokens; Synapse's bodies (note §1)."""
        header = req.headers.get("Authorization")
        token: str | None = None
        if header is not None:
            scheme, _, value = header.partition(" ")
            if scheme.lower() == "bearer" and value.strip():
                token = value.strip()
        elif "access_token" in req.query:
            token = req.query["access_token"]
        if not token:
            return mx_error(401, "M_MISSING_TOKEN", "Missing access token")
        if token != self.token:
            return mx_error(401, "M_UNKNOWN_TOKEN", "Unrecognised access token", soft_logout=False)
        if self.revoked:
            return self.unknown_token(self.revoked_soft)
        return None

    @staticmethod
    def unknown_token(soft: bool) -> web.Response:
        return mx_error(401, "M_UNKNOWN_TOKEN", "Access token has expired" if soft else "Unrecognised access token",
                        soft_logout=bool(soft))

    # ------------------------------------------------------------------ simple endpoints
    async def versions(self, _req: web.Request) -> web.Response:
        return reply({"versions": SPEC_VERSIONS, "unstable_features": {"org.matrix.msc3970": True}})

    async def whoami(self, req: web.Request) -> web.Response:
        self.stats["whoami"] += 1
        return self.auth(req) or reply({"user_id": self.user_id, "device_id": self.device_id, "is_guest": False})

    async def joined_rooms(self, req: web.Request) -> web.Response:
        return self.auth(req) or reply({"joined_rooms": list(self.rooms)})

    def current_state(self, room: str, before: int, after: int = 0) -> list[Event]:
        """The latest state event per (type, state_key) with after < pos < before, in stream order."""
        latest: dict[tuple[str, str], Event] = {}
        for ev in self.room_state_evs[room]:
            if ev.pos >= before:
                break
            if ev.pos > after:
                latest[(ev.type, ev.state_key or "")] = ev
        return sorted(latest.values(), key=lambda e: e.pos)

    def scan(self, room: str, lo: int, hi: int, flt: EventFilter, newest_first: bool, want: int
             ) -> tuple[list[Event], bool]:
        """Up to `want` events of the room with lo < pos <= hi that pass flt, and whether more exist."""
        pos, evs = self.room_pos[room], self.rooms[room]
        i, j = bisect.bisect_right(pos, lo), bisect.bisect_right(pos, hi)
        out: list[Event] = []
        for k in (range(j - 1, i - 1, -1) if newest_first else range(i, j)):
            if flt.allows(evs[k]):
                if len(out) == want:
                    return out, True
                out.append(evs[k])
        return out, False

    async def room_state(self, req: web.Request) -> web.Response:
        """GET /rooms/{roomId}/state/{eventType}/{stateKey}: the content, or 404 M_NOT_FOUND (note §7)."""
        self.stats["state_requests"] += 1
        err = self.auth(req)
        if err:
            return err
        room = req.match_info["roomId"]
        if room not in self.rooms:
            return mx_error(403, "M_FORBIDDEN", f"User {self.user_id} not in room {room}")
        etype, key = req.match_info.get("eventType"), req.match_info.get("stateKey", "")
        state = self.current_state(room, self.head + 1)
        if etype is None:
            return reply([self.client_event(e, True) for e in state])
        for ev in state:
            if ev.type == etype and ev.state_key == key:
                return reply(ev.content)
        return mx_error(404, "M_NOT_FOUND", "Event not found.")

    async def upload_filter(self, req: web.Request) -> web.Response:
        """POST /user/{userId}/filter (filter.yaml)."""
        err = self.auth(req)
        if err:
            return err
        if req.match_info["userId"] != self.user_id:
            return mx_error(403, "M_FORBIDDEN", "Can only create filters for local user")
        try:
            body = json.loads(await req.read())
        except ValueError:
            return mx_error(400, "M_NOT_JSON", "Content not JSON.")
        try:
            SyncFilter(body)
        except BadFilter as e:
            return mx_error(400, e.errcode, e.error)
        self.filters.append(body)
        self.stats["filters_uploaded"] += 1
        return reply({"filter_id": str(len(self.filters) - 1)})

    async def get_filter(self, req: web.Request) -> web.Response:
        err = self.auth(req)
        if err:
            return err
        fid = req.match_info["filterId"]
        if req.match_info["userId"] != self.user_id:
            return mx_error(403, "M_FORBIDDEN", "Cannot get filters for other users")
        if not fid.isdigit() or int(fid) >= len(self.filters):
            return mx_error(404, "M_NOT_FOUND", "No such filter")
        return reply(self.filters[int(fid)])

    def parse_filter(self, raw: str | None) -> SyncFilter:
        """[sync.yaml] filter: inline JSON if the first character is '{', else a filter ID (note §3)."""
        if raw is None or raw == "":
            return SyncFilter({})
        if raw.startswith("{"):
            try:
                body = json.loads(raw)
            except ValueError:
                raise BadFilter("M_NOT_JSON", "'filter' JSON is not valid JSON") from None
            return SyncFilter(body)
        if not raw.isdigit() or int(raw) >= len(self.filters):
            raise BadFilter("M_INVALID_PARAM", "No such filter")
        return SyncFilter(self.filters[int(raw)])

    # ------------------------------------------------------------------ events out
    def client_event(self, ev: Event, with_room: bool, now: int | None = None) -> dict[str, Any]:
        """ClientEvent(WithoutRoomID): unsigned.transaction_id only for the device that sent it (MSC3970)."""
        now = now if now is not None else int(time.time() * 1000)
        d: dict[str, Any] = {"type": ev.type, "sender": ev.sender, "content": ev.content,
                             "origin_server_ts": ev.ts, "event_id": ev.event_id}
        if ev.state_key is not None:
            d["state_key"] = ev.state_key
        unsigned: dict[str, Any] = {"age": max(0, now - ev.ts)}
        if ev.txn_id is not None and ev.device_id == self.device_id:
            unsigned["transaction_id"] = ev.txn_id
        d["unsigned"] = unsigned
        if with_room:
            d["room_id"] = ev.room
        return d

    # ------------------------------------------------------------------ /sync
    def build_sync(self, since: int | None, flt: SyncFilter, full_state: bool) -> tuple[dict[str, Any], int, int]:
        """rooms.join for (since, head]; returns (join, head, limited rooms). See note §2 "state semantics"."""
        head, now = self.head, int(time.time() * 1000)
        join: dict[str, Any] = {}
        limited_rooms = 0
        for room in self.rooms:
            if not flt.room_ok(room):
                continue
            newest, limited = self.scan(room, since or 0, head, flt.timeline, True, flt.limit)
            timeline = newest[::-1]
            first = timeline[0].pos if timeline else head + 1
            if since is None or full_state:
                state = self.current_state(room, first)
            elif limited:
                state = self.current_state(room, first, after=since)
            else:
                state = []
            state = [e for e in state if flt.state.allows(e)]
            if not (since is None or full_state or timeline or state):
                continue
            tl: dict[str, Any] = {"events": [self.client_event(e, False, now) for e in timeline], "limited": limited}
            if self.room_pos[room] and self.room_pos[room][0] < first:  # timeline_batch.yaml: may be omitted
                tl["prev_batch"] = self.topo_token(room, first - 1)
            entry: dict[str, Any] = {"timeline": tl}
            if state:
                entry["state"] = {"events": [self.client_event(e, False, now) for e in state]}
            join[room] = entry
            limited_rooms += limited
        return join, head, limited_rooms

    def sync_body(self, since_tok: str | None, since: int | None, join: dict[str, Any], head: int) -> dict[str, Any]:
        if since_tok is not None and since == head and not join:
            next_batch = since_tok  # nothing new: the repeated batch (note §2, Synapse)
        else:
            next_batch = self.stream_token(head)
        body: dict[str, Any] = {"next_batch": next_batch, "device_one_time_keys_count": {"signed_curve25519": 0}}
        if join:
            body["rooms"] = {"join": join}
        return body

    async def sync(self, req: web.Request) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        self.stats["syncs"] += 1
        self.sync_rate.hit(loop.time(), self.ms())
        self.live_syncs += 1
        try:
            resp = await self._sync(req)
            if resp.status == 200:
                self.stats["syncs_answered"] += 1
            else:
                self.stats["refused"] += 1
            return resp
        finally:
            self.live_syncs -= 1

    async def _sync(self, req: web.Request) -> web.StreamResponse:
        err = self.auth(req)
        if err:
            return err
        q = req.query
        if "from" in q:
            return mx_error(400, "M_UNKNOWN", "'from' is not a valid query parameter. Did you mean 'since'?")
        try:
            timeout = int(q.get("timeout", "0"))
            if timeout < 0:
                raise ValueError
        except ValueError:
            return mx_error(400, "M_INVALID_PARAM", "Query parameter 'timeout' must be a non-negative integer")
        full_state_raw = q.get("full_state", "false")
        if full_state_raw not in ("true", "false"):
            return mx_error(400, "M_INVALID_PARAM", "Boolean query parameter 'full_state' must be 'true' or 'false'")
        full_state = full_state_raw == "true"
        presence = q.get("set_presence", "online")
        if presence not in PRESENCE:
            return mx_error(400, "M_INVALID_PARAM", f"Query parameter 'set_presence' must be one of {list(PRESENCE)}")
        self.last_presence = presence
        try:
            flt = self.parse_filter(q.get("filter"))
        except BadFilter as e:
            return mx_error(400, e.errcode, e.error)
        since_tok = q.get("since") or None
        fault = self.take_sync_fault(since_tok is not None)
        if fault is not None:
            resp = await self.sync_fault_answer(req, fault, since_tok)
            if resp is not None:
                return resp
        since: int | None = None
        if since_tok is not None:
            since = self.parse_token(since_tok)
            if since is None:
                return mx_error(400, "M_UNKNOWN", "Invalid stream token")
        else:
            self.stats["initial_syncs"] += 1
        timeout = min(timeout, self.args.max_timeout_ms)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout / 1000
        held = False
        while True:
            join, head, limited = self.build_sync(since, flt, full_state)
            # Synapse returns at once with no since, full_state or timeout 0; otherwise only a non-empty
            # (filtered) result ends the wait early (note §2, Long-poll semantics).
            if join or since is None or full_state or timeout == 0 or loop.time() >= deadline:
                if held:
                    self.stats["syncs_early" if join else "syncs_timed_out"] += 1
                self.stats["limited"] += limited
                body = self.sync_body(since_tok, since, join, head)
                if since_tok is not None and body["next_batch"] == since_tok:
                    self.stats["repeated_batches"] += 1
                return reply(body)
            if not held:
                held = True
                self.stats["syncs_held"] += 1
            await self.wait(deadline - loop.time())
            if self.revoked:
                return self.unknown_token(self.revoked_soft)

    def take_sync_fault(self, has_since: bool) -> dict[str, Any] | None:
        f = self.sync_fault
        if f is None or (f["fault"] in ("repeat_batch", "invalid_since") and not has_since):
            return None
        if f["count"] is not None:
            f["count"] -= 1
            if f["count"] <= 0:
                self.sync_fault = None
        self.stats["faults_fired"] += 1
        return f

    async def sync_fault_answer(self, req: web.Request, f: dict[str, Any], since_tok: str | None
                                ) -> web.StreamResponse | None:
        kind = f["fault"]
        if kind == "hang":  # read and never answered: no status line, no headers (note, mock item 1)
            self.stats["hung"] += 1
            await asyncio.get_running_loop().create_future()
        if kind == "half_body":  # 200 + headers + part of a real body, then silence (mock item 2)
            self.stats["half_bodies"] += 1
            join, head, _ = self.build_sync(None, SyncFilter({}), False)
            data = dumps(self.sync_body(None, None, join, head)).encode()
            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            resp.content_length = len(data)
            await resp.prepare(req)
            await resp.write(data[: max(1, len(data) // 2)])
            await asyncio.get_running_loop().create_future()
        if kind == "429":
            return rate_limited(f)
        if kind == "5xx":
            return server_error(f)
        if kind == "unknown_token":
            return self.unknown_token(bool(f.get("soft_logout", False)))
        if kind == "invalid_since":
            return mx_error(400, "M_UNKNOWN", "Invalid stream token")
        if kind == "repeat_batch":
            hold = f.get("hold_ms", 0)
            if hold:
                await asyncio.sleep(hold / 1000)
            self.stats["repeated_batches"] += 1
            return reply({"next_batch": since_tok})
        return None

    # ------------------------------------------------------------------ /messages
    async def messages(self, req: web.Request) -> web.Response:
        """GET /rooms/{roomId}/messages (message_pagination.yaml; note §4)."""
        self.stats["messages_requests"] += 1
        err = self.auth(req)
        if err:
            return err
        room, q = req.match_info["roomId"], req.query
        if room not in self.rooms:
            return mx_error(403, "M_FORBIDDEN", f"User {self.user_id} not in room {room}")
        d = q.get("dir")
        if d is None:
            return mx_error(400, "M_MISSING_PARAM", "Missing string query parameter 'dir'")
        if d not in ("b", "f"):
            return mx_error(400, "M_INVALID_PARAM", "Query parameter 'dir' must be one of ['b', 'f']")
        try:
            limit = int(q.get("limit", str(MESSAGES_DEFAULT_LIMIT)))
            if limit < 1:
                raise ValueError
        except ValueError:
            return mx_error(400, "M_INVALID_PARAM", "Query parameter 'limit' must be a positive integer")
        limit = min(limit, MESSAGES_MAX_LIMIT)
        raw_filter = q.get("filter")
        try:
            flt = EventFilter(json.loads(raw_filter)) if raw_filter else EventFilter({})
        except ValueError:
            return mx_error(400, "M_NOT_JSON", "'filter' JSON is not valid JSON")
        except BadFilter as e:
            return mx_error(400, e.errcode, e.error)
        head = self.head
        from_tok = q.get("from")
        if from_tok:
            frm = self.parse_token(from_tok)
            if frm is None:
                return mx_error(400, "M_UNKNOWN", "Invalid stream token")
        else:
            frm = head if d == "b" else 0
            from_tok = self.topo_token(room, frm)
        to: int | None = None
        if q.get("to"):
            to = self.parse_token(q["to"])
            if to is None:
                return mx_error(400, "M_UNKNOWN", "Invalid stream token")
        if d == "b":
            chunk, more = self.scan(room, to if to is not None else 0, frm, flt, True, limit)
        else:
            chunk, more = self.scan(room, frm, to if to is not None else head, flt, False, limit)
        body: dict[str, Any] = {"start": from_tok, "chunk": []}
        if chunk and self.messages_opts["empty_pages"] > 0:
            # A page with an empty chunk but an end (note, mock item 8): same position, another spelling.
            self.messages_opts["empty_pages"] -= 1
            self.stats["messages_empty_pages"] += 1
            body["end"] = self.stream_token(frm) if from_tok.startswith("t") else self.topo_token(room, frm)
            return reply(body)
        now = int(time.time() * 1000)
        body["chunk"] = [self.client_event(e, True, now) for e in chunk]
        if chunk and (more or self.messages_opts["lazy_end"]):
            boundary = chunk[-1].pos - 1 if d == "b" else chunk[-1].pos
            body["end"] = self.topo_token(room, boundary)
        return reply(body)

    # ------------------------------------------------------------------ send
    async def send(self, req: web.Request) -> web.StreamResponse:
        """PUT /rooms/{roomId}/send/{eventType}/{txnId} (room_send.yaml; note §5)."""
        loop = asyncio.get_running_loop()
        self.stats["sends"] += 1
        self.send_rate.hit(loop.time(), self.ms())
        room, etype, txn = req.match_info["roomId"], req.match_info["eventType"], req.match_info["txnId"]
        attempt: dict[str, Any] = {"room": room, "event_type": etype, "txn_id": txn, "status": None, "fault": None,
                                   "cached": False, **self.when()}
        self.attempts.append(attempt)
        raw = await req.read()
        err = self.auth(req)
        if err:
            attempt["status"] = err.status
            return err
        # Synapse HttpTransactionCache: key (path, user, device); the body is not compared; a concurrent
        # duplicate waits for the first; failures are not cached.
        key = (room, etype, txn, self.device_id)
        cached = self.txns.get(key)
        if cached is not None:
            self.stats["txn_hits"] += 1
            attempt["cached"] = True
            if not cached.done():
                self.stats["txn_waits"] += 1
            status, body, headers, _ = await asyncio.shield(cached)
            attempt["status"] = status
            return answer(body, status, headers)
        # The send runs in its own task: like Synapse, it completes even if this client goes away, so a
        # retry after a client-side timeout finds the event in the transaction cache.
        fut: asyncio.Future[tuple[int, Any, dict[str, str], str | None]] = loop.create_future()
        self.txns[key] = fut
        task = loop.create_task(self.process_send(room, etype, txn, raw, attempt))
        self.tasks.add(task)
        task.add_done_callback(lambda t: self.send_done(t, key, fut))
        try:
            status, body, headers, action = await asyncio.shield(fut)
        except asyncio.CancelledError:
            attempt["error"] = "client went away before the answer"
            raise
        if action == "reset_after":  # recorded and cached, then the connection drops without an answer
            self.stats["sends_reset"] += 1
            attempt.update(status=None, error="connection dropped")
            if req.transport is not None:
                req.transport.abort()
            raise asyncio.CancelledError
        if action == "hang_after":
            self.stats["sends_hung"] += 1
            attempt.update(status=None, error="never answered")
            await loop.create_future()
        attempt["status"] = status
        if status != 200:
            self.stats["sends_refused"] += 1
        return answer(body, status, headers)

    def send_done(self, task: asyncio.Task[Any], key: tuple[str, str, str, str],
                  fut: asyncio.Future[tuple[int, Any, dict[str, str], str | None]]) -> None:
        self.tasks.discard(task)
        if task.cancelled() or task.exception() is not None:
            result: tuple[int, Any, dict[str, str], str | None] = (
                500, {"errcode": "M_UNKNOWN", "error": "Internal server error"}, {}, None)
        else:
            result = task.result()
        if result[0] != 200:  # failures are not cached (note §5, Synapse HttpTransactionCache)
            self.txns.pop(key, None)
        if not fut.done():
            fut.set_result(result)

    async def process_send(self, room: str, etype: str, txn: str, raw: bytes, attempt: dict[str, Any]
                           ) -> tuple[int, Any, dict[str, str], str | None]:
        try:
            content = json.loads(raw) if raw else None
        except ValueError:
            return 400, {"errcode": "M_NOT_JSON", "error": "Content not JSON."}, {}, None
        if not isinstance(content, dict):
            return 400, {"errcode": "M_BAD_JSON", "error": "Body must be a JSON object"}, {}, None
        if room not in self.rooms:
            return 403, {"errcode": "M_FORBIDDEN", "error": f"User {self.user_id} not in room {room}"}, {}, None
        fault = self.take_post_fault()
        kind = fault["fault"] if fault else None
        attempt["fault"] = kind
        if kind == "slow":
            await asyncio.sleep(fault.get("delay_ms", 500) / 1000)
        if kind == "429":
            return (429, *rate_limit_parts(fault), None)
        if kind == "500":
            resp = server_error(fault)
            return resp.status, resp, {}, None
        ev = self.append(room, etype, self.user_id, content, txn_id=txn, device_id=self.device_id, source="send")
        rel = content.get("m.relates_to") if isinstance(content.get("m.relates_to"), dict) else {}
        in_reply = rel.get("m.in_reply_to") if isinstance(rel.get("m.in_reply_to"), dict) else {}
        self.posts.append({"room": room, "event_type": etype, "body": content.get("body"),
                           "msgtype": content.get("msgtype"), "txn_id": txn, "event_id": ev.event_id,
                           "reply_to": in_reply.get("event_id"),
                           "thread_root": rel.get("event_id") if rel.get("rel_type") == "m.thread" else None,
                           "content": content, **self.when()})
        self.stats["sends_accepted"] += 1
        attempt["event_id"] = ev.event_id
        return 200, {"event_id": ev.event_id}, {}, kind if kind in ("reset_after", "hang_after") else None

    def take_post_fault(self) -> dict[str, Any] | None:
        f = self.post_fault
        if f is None:
            return None
        f["count"] -= 1
        if f["count"] <= 0:
            self.post_fault = None
        self.stats["faults_fired"] += 1
        return f

    # ------------------------------------------------------------------ control
    async def control(self, req: web.Request) -> web.Response:
        name = req.match_info["name"]
        raw = await req.read()
        try:
            spec = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return reply({"error": "body is not JSON"}, 400)
        if not isinstance(spec, dict):
            return reply({"error": "body must be a JSON object"}, 400)
        handler = {"emit": self.c_emit, "encrypt": self.c_encrypt, "fault": self.c_fault,
                   "post_fault": self.c_post_fault, "messages": self.c_messages, "clear": self.c_clear,
                   "revoke": self.c_revoke, "restore": self.c_restore}.get(name)
        if handler is None:
            return reply({"error": f"unknown control route {name!r}"}, 404)
        try:
            return reply({"ok": True, **handler(spec)})
        except ValueError as e:
            return reply({"error": str(e)}, 400)

    def pick_room(self, spec: dict[str, Any]) -> str:
        room = spec.get("room", next(iter(self.rooms)))
        if room not in self.rooms:
            raise ValueError(f"unknown room {room!r}; rooms are {list(self.rooms)}")
        return room

    def c_emit(self, spec: dict[str, Any]) -> dict[str, Any]:
        room = self.pick_room(spec)
        n = spec.get("n", 1)
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 100_000:
            raise ValueError("n is an integer 0..100000")
        sender = spec.get("sender", self.peer)
        ids = []
        for _ in range(n):
            self.emitted += 1
            if spec.get("encrypted"):
                etype = "m.room.encrypted"
                content: dict[str, Any] = {"algorithm": MEGOLM, "ciphertext": b64(96), "session_id": b64(32),
                                           "sender_key": b64(32), "device_id": "PEERDEVICE"}
            elif "content" in spec:
                if not isinstance(spec["content"], dict):
                    raise ValueError("content is a JSON object")
                etype, content = spec.get("type", "m.room.message"), dict(spec["content"])
            else:
                etype = spec.get("type", "m.room.message")
                content = {"msgtype": spec.get("msgtype", "m.text"),
                           "body": spec["text"] if "text" in spec else f"independent message {self.emitted}"}
                if spec.get("reply_to"):
                    content["m.relates_to"] = {"m.in_reply_to": {"event_id": spec["reply_to"]}}
            ids.append(self.append(room, etype, sender, content, spec.get("state_key")).event_id)
        return {"room": room, "event_ids": ids, "next_batch": self.stream_token(self.head)}

    def c_encrypt(self, spec: dict[str, Any]) -> dict[str, Any]:
        room = self.pick_room(spec)
        return {"room": room, "event_id": self.encrypt(room).event_id}

    @staticmethod
    def count_of(spec: dict[str, Any], default: int | None) -> int | None:
        count = spec.get("count", default)
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
            raise ValueError("count is a positive integer")
        return count

    def c_fault(self, spec: dict[str, Any]) -> dict[str, Any]:
        kind = spec.get("fault")
        if kind in (None, "none"):
            self.sync_fault = None
            return {"fault": None}
        if kind not in SYNC_FAULTS:
            raise ValueError(f"fault is one of {list(SYNC_FAULTS)} or 'none'")
        self.sync_fault = {**spec, "count": self.count_of(spec, None)}
        return {"fault": dict(self.sync_fault)}

    def c_post_fault(self, spec: dict[str, Any]) -> dict[str, Any]:
        kind = spec.get("fault")
        if kind in (None, "none"):
            self.post_fault = None
            return {"post_fault": None}
        if kind not in POST_FAULTS:
            raise ValueError(f"fault is one of {list(POST_FAULTS)} or 'none'")
        self.post_fault = {**spec, "count": self.count_of(spec, 1)}
        return {"post_fault": dict(self.post_fault)}

    def c_messages(self, spec: dict[str, Any]) -> dict[str, Any]:
        empty = spec.get("empty_pages", 0)
        if not isinstance(empty, int) or isinstance(empty, bool) or empty < 0:
            raise ValueError("empty_pages is a non-negative integer")
        self.messages_opts = {"empty_pages": empty, "lazy_end": bool(spec.get("lazy_end", False))}
        return {"messages": dict(self.messages_opts)}

    def c_clear(self, _spec: dict[str, Any]) -> dict[str, Any]:
        self.sync_fault = self.post_fault = None
        self.messages_opts = {"empty_pages": 0, "lazy_end": False}
        self.revoked = False
        return {}

    def c_revoke(self, spec: dict[str, Any]) -> dict[str, Any]:
        self.revoked, self.revoked_soft = True, bool(spec.get("soft_logout", False))
        self.wake("revoked")
        return {"revoked": True, "soft_logout": self.revoked_soft}

    def c_restore(self, _spec: dict[str, Any]) -> dict[str, Any]:
        self.revoked = False
        return {"revoked": False}

    # ------------------------------------------------------------------ records
    async def stats_page(self, _req: web.Request) -> web.Response:
        return reply({**self.stats, "live_syncs": self.live_syncs, "max_syncs_per_s": self.sync_rate.max,
                      "max_sends_per_s": self.send_rate.max, "sync_request_ms": list(self.sync_rate.recent_ms),
                      "last_set_presence": self.last_presence, "revoked": self.revoked,
                      "stream_head": self.head, "sync_fault": self.sync_fault, "post_fault": self.post_fault})

    async def posts_page(self, _req: web.Request) -> web.Response:
        return reply({"posts": self.posts, "attempts": self.attempts})

    async def events_page(self, _req: web.Request) -> web.Response:
        return reply({"events": [e.describe() for e in self.log]})


def answer(body: Any, status: int, headers: dict[str, str]) -> web.Response:
    """A stored send result: a JSON body, or a prepared error page (server_error) rebuilt per request."""
    if isinstance(body, web.Response):
        return web.Response(status=body.status, body=body.body, content_type=body.content_type)
    return reply(body, status, headers)


def rate_limited(f: dict[str, Any]) -> web.Response:
    body, headers = rate_limit_parts(f)
    return reply(body, 429, headers)


def rate_limit_parts(f: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """429 M_LIMIT_EXCEEDED: Synapse sends retry_after_ms and Retry-After: ceil(ms/1000) (note §6).
    `retry_after_ms: null` drops the body field, `header_secs: null` the header; `header_date: true` sends
    the header as an HTTP-date."""
    ms = f.get("retry_after_ms", 1500)
    body: dict[str, Any] = {"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests"}
    if ms is not None:
        body["retry_after_ms"] = int(ms)
    secs = f.get("header_secs", math.ceil(ms / 1000) if ms is not None else 2)
    headers: dict[str, str] = {}
    if secs is not None:
        headers["Retry-After"] = (email.utils.formatdate(time.time() + int(secs), usegmt=True)
                                  if f.get("header_date") else str(int(secs)))
    return body, headers


def server_error(f: dict[str, Any]) -> web.Response:
    status = int(f.get("status", 500))
    if f.get("empty"):
        return web.Response(status=status, body=b"", content_type="text/plain")
    if f.get("html"):
        reason = REASONS.get(status, "Server Error")
        return web.Response(status=status, text=HTML_PAGE.format(code=status, reason=reason), content_type="text/html")
    return mx_error(status, "M_UNKNOWN", "Internal server error")


@web.middleware
async def matrix_404(req: web.Request, handler: Any) -> web.StreamResponse:
    """Unknown /_matrix endpoints: 404 / 405 M_UNRECOGNIZED (note §6)."""
    try:
        return await handler(req)
    except web.HTTPNotFound:
        if req.path.startswith("/_matrix/"):
            return mx_error(404, "M_UNRECOGNIZED", "Unrecognized request")
        raise
    except web.HTTPMethodNotAllowed:
        if req.path.startswith("/_matrix/"):
            return mx_error(405, "M_UNRECOGNIZED", "Unrecognized request")
        raise


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--access-token", default="mx-indep-token")
    p.add_argument("--user-id", default="@bot:indep.test")
    p.add_argument("--device-id", default="INDEPDEVICE")
    p.add_argument("--rooms", default="!r1:indep.test", help="comma-separated rooms the bot has joined")
    p.add_argument("--encrypted-rooms", default="", help="comma-separated rooms with m.room.encryption from the start")
    p.add_argument("--peer-user", default="", help="the other member and default sender (default @alice:<server>)")
    p.add_argument("--max-timeout-ms", type=int, default=30_000, help="cap on the /sync timeout parameter")
    p.add_argument("--max-upload-bytes", type=int, default=matrix_media.DEFAULT_MAX_UPLOAD,
                   help="m.upload.size: larger uploads get 413 M_TOO_LARGE (default 50 MiB, Synapse's)")
    p.add_argument("--media-dir", default="", help="where uploads are kept (a fresh directory inside it; default "
                   "the system's temporary directory); removed on exit")
    args = p.parse_args(argv)
    args.rooms = [r.strip() for r in args.rooms.split(",") if r.strip()]
    args.encrypted_rooms = {r.strip() for r in args.encrypted_rooms.split(",") if r.strip()}
    if not args.rooms:
        p.error("--rooms needs at least one room")
    if not args.encrypted_rooms <= set(args.rooms):
        p.error("--encrypted-rooms must be a subset of --rooms")
    if not re.fullmatch(r"@[^:]+:.+", args.user_id):
        p.error("--user-id looks like @localpart:server")
    if args.max_timeout_ms < 0:
        p.error("--max-timeout-ms is >= 0")
    if args.max_upload_bytes < 0:
        p.error("--max-upload-bytes is >= 0")
    return args


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    hs = Homeserver(args)
    app = web.Application(middlewares=[matrix_404])
    r = app.router
    r.add_get("/_matrix/client/versions", hs.versions)
    for v in ("v3", "r0"):
        c = f"/_matrix/client/{v}"
        r.add_get(f"{c}/account/whoami", hs.whoami)
        r.add_get(f"{c}/joined_rooms", hs.joined_rooms)
        r.add_get(f"{c}/sync", hs.sync)
        r.add_get(f"{c}/rooms/{{roomId}}/messages", hs.messages)
        r.add_put(f"{c}/rooms/{{roomId}}/send/{{eventType}}/{{txnId}}", hs.send)
        r.add_get(f"{c}/rooms/{{roomId}}/state", hs.room_state)
        r.add_get(f"{c}/rooms/{{roomId}}/state/{{eventType}}", hs.room_state)
        r.add_get(f"{c}/rooms/{{roomId}}/state/{{eventType}}/{{stateKey:.*}}", hs.room_state)
        r.add_post(f"{c}/user/{{userId}}/filter", hs.upload_filter)
        r.add_get(f"{c}/user/{{userId}}/filter/{{filterId}}", hs.get_filter)
    r.add_post("/_control/{name}", hs.control)
    r.add_get("/_independent/stats", hs.stats_page)
    r.add_get("/_posts", hs.posts_page)
    r.add_get("/_events", hs.events_page)
    matrix_media.add_routes(app, hs.media)
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
    hs.media.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
