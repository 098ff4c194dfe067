"""The content repository of matrix_server.py (issue 47): uploads, downloads, the media config, and the bench's own
routes to put a file in and say it in a room, with a record of every file and every file event.

Written from matrix-org/matrix-spec data/api/client-server/content-repo.yaml (`POST /_matrix/media/v3/upload`,
`uploadTooLarge`, the `filename` and `Content-Type` parameters) and authed-content-repo.yaml (v1.11 authenticated
media: `GET /_matrix/client/v1/media/config` and `…/media/download/{serverName}/{mediaId}[/{fileName}]`), with
docs/research/media-platforms.md §3 for Synapse's default upload cap. Not from src/ (neither the mock nor the
adapter). The choices the spec leaves open are in README.md ("Content repository").

Bytes never sit whole in memory: an upload is streamed to a temporary file as it arrives (hashed on the way) and
renamed into place when complete; a download is streamed from that file in fixed chunks. Files are written with
plain blocking writes from the event loop: each chunk is at most 256 KiB into the page cache, which is cheaper
than a thread hop, and this server serves one benchmark at a time.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import string
import tempfile
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

if TYPE_CHECKING:  # the server imports this module, never the other way at run time
    from matrix_server import Event, Homeserver

# Synapse's default max_upload_size is "50M", read as MiB (docs/research/media-platforms.md §3).
DEFAULT_MAX_UPLOAD = 50 * 1024 * 1024
CHUNK = 256 * 1024
FILE_MSGTYPES = ("m.image", "m.file", "m.audio", "m.video")
# Served `inline`; anything else `attachment` (authed-content-repo.yaml Content-Disposition: "If the Content-Type
# is allowed in the restrictions for serving inline content, servers SHOULD use inline"). A subset of that list,
# chosen here: the media types a chat shows in place.
INLINE_TYPES = {"text/plain", "text/css", "text/csv", "application/json", "image/jpeg", "image/gif", "image/png",
                "image/apng", "image/webp", "image/avif", "video/mp4", "video/webm", "video/ogg", "video/quicktime",
                "audio/mp4", "audio/webm", "audio/aac", "audio/mpeg", "audio/ogg", "audio/wav", "audio/flac"}
MEDIA_STAT_KEYS = ("media_uploads", "media_uploads_refused", "media_bytes_in", "media_downloads",
                   "media_downloads_missing", "media_bytes_out", "media_config", "file_events")


def reply(body: Any, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, dumps=lambda o: json.dumps(o, separators=(",", ":")))


def mx_error(status: int, errcode: str, error: str) -> web.Response:
    """[spec] §Standard error response, as matrix_server.py answers it."""
    return reply({"errcode": errcode, "error": error}, status)


def media_id() -> str:
    """24 ASCII letters, like the spec's example `ascERGshawAWawugaAcauga` (opaque; chosen here)."""
    return "".join(secrets.choice(string.ascii_letters) for _ in range(24))


def disposition(content_type: str, filename: str | None) -> str:
    """`inline` or `attachment`, with the file name when there is one (RFC 6266; `filename*` for non-ASCII)."""
    kind = "inline" if content_type.split(";")[0].strip().lower() in INLINE_TYPES else "attachment"
    if not filename:
        return kind
    if filename.isascii() and '"' not in filename and "\\" not in filename and filename.isprintable():
        return f'{kind}; filename="{filename}"'
    return f"{kind}; filename*=utf-8''{quote(filename, safe='')}"


class Stored(Exception):
    """An upload that could not be stored: the Matrix error to answer with."""

    def __init__(self, status: int, errcode: str, error: str) -> None:
        super().__init__(error)
        self.status, self.errcode, self.error = status, errcode, error


class MediaRepo:
    def __init__(self, hs: "Homeserver", parent: str | None, max_upload: int) -> None:
        self.hs = hs
        self.dir = tempfile.mkdtemp(prefix="matrix-indep-media-", dir=parent or None)
        self.max_upload = max_upload
        self.files: dict[str, dict[str, Any]] = {}
        self.file_events: list[dict[str, Any]] = []
        self.downloads: list[dict[str, Any]] = []
        for k in MEDIA_STAT_KEYS:
            hs.stats[k] = 0

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ storing
    async def store(self, req: web.Request, source: str) -> dict[str, Any]:
        """The request body streamed to disk: its record, or Stored (413 M_TOO_LARGE) with nothing kept."""
        declared = req.content_length
        if declared is not None and declared > self.max_upload:
            raise Stored(413, "M_TOO_LARGE", f"Cannot upload files larger than {self.max_upload} bytes")
        mid = media_id()
        final = os.path.join(self.dir, mid)
        part = final + ".part"
        digest, size = hashlib.sha256(), 0
        started = time.monotonic()
        try:
            with open(part, "wb") as f:
                async for chunk in req.content.iter_chunked(CHUNK):
                    size += len(chunk)
                    if size > self.max_upload:
                        raise Stored(413, "M_TOO_LARGE", f"Cannot upload files larger than {self.max_upload} bytes")
                    digest.update(chunk)
                    f.write(chunk)
            os.replace(part, final)
        finally:
            if os.path.exists(part):
                os.unlink(part)
        ctype = req.headers.get("Content-Type") or "application/octet-stream"  # content-repo.yaml: the default
        record = {"media_id": mid, "content_uri": f"mxc://{self.hs.server_name}/{mid}",
                  "filename": req.query.get("filename") or None, "content_type": ctype, "size": size,
                  "sha256": digest.hexdigest(), "source": source,
                  "took_ms": round((time.monotonic() - started) * 1000, 3), **self.hs.when()}
        self.files[mid] = {**record, "path": final}
        self.hs.stats["media_uploads"] += 1
        self.hs.stats["media_bytes_in"] += size
        return record

    async def upload(self, req: web.Request) -> web.Response:
        """POST /_matrix/media/v3/upload?filename= (content-repo.yaml uploadContent): {"content_uri"}."""
        err = self.hs.auth(req)
        if err:
            return err
        try:
            record = await self.store(req, "upload")
        except Stored as e:
            self.hs.stats["media_uploads_refused"] += 1
            return mx_error(e.status, e.errcode, e.error)
        return reply({"content_uri": record["content_uri"]})

    async def config(self, req: web.Request) -> web.Response:
        """GET /_matrix/client/v1/media/config (authed-content-repo.yaml getConfigAuthed)."""
        self.hs.stats["media_config"] += 1
        return self.hs.auth(req) or reply({"m.upload.size": self.max_upload})

    # ------------------------------------------------------------------ serving
    async def download(self, req: web.Request) -> web.StreamResponse:
        """GET /_matrix/client/v1/media/download/{serverName}/{mediaId}[/{fileName}] (getContentAuthed): the bytes
        streamed from disk, with Content-Type as uploaded and Content-Disposition (required since v1.12)."""
        err = self.hs.auth(req)
        if err:
            return err
        server, mid = req.match_info["serverName"], req.match_info["mediaId"]
        record = self.files.get(mid) if server == self.hs.server_name else None
        log: dict[str, Any] = {"server_name": server, "media_id": mid, "status": 404, "bytes": 0, **self.hs.when()}
        self.downloads.append(log)
        if record is None:  # no federation here: another server's media is unknown too (chosen)
            self.hs.stats["media_downloads_missing"] += 1
            return mx_error(404, "M_NOT_FOUND", "Not found")
        name = req.match_info.get("fileName") or record["filename"]
        resp = web.StreamResponse(status=200, headers={
            "Content-Type": record["content_type"], "Content-Disposition": disposition(record["content_type"], name)})
        resp.content_length = record["size"]
        log["status"] = 200
        self.hs.stats["media_downloads"] += 1
        await resp.prepare(req)
        with open(record["path"], "rb") as f:
            while chunk := f.read(CHUNK):
                await resp.write(chunk)
                log["bytes"] += len(chunk)
                self.hs.stats["media_bytes_out"] += len(chunk)
        await resp.write_eof()
        log["done_ms"] = self.hs.ms()
        return resp

    async def frozen(self, req: web.Request) -> web.Response:
        """GET /_matrix/media/v3/download/…: the unauthenticated endpoint, frozen (content-repo.yaml, v1.11: "MAY
        return 404 M_NOT_FOUND for media which exists, but is after the server froze unauthenticated media")."""
        self.downloads.append({"server_name": req.match_info["serverName"], "media_id": req.match_info["mediaId"],
                               "status": 404, "bytes": 0, "unauthenticated": True, **self.hs.when()})
        self.hs.stats["media_downloads_missing"] += 1
        return mx_error(404, "M_NOT_FOUND", "Not found")

    # ------------------------------------------------------------------ file events
    def note_event(self, ev: "Event") -> None:
        """Called for every m.room.message appended: an m.image/m.file/m.audio/m.video naming an mxc URI is
        recorded, with the bytes the repository holds for it (sha256 and size), or in_repo false."""
        c = ev.content
        url = c.get("url")
        if c.get("msgtype") not in FILE_MSGTYPES or not isinstance(url, str) or not url.startswith("mxc://"):
            return
        server, _, mid = url[len("mxc://"):].partition("/")
        rec = self.files.get(mid) if server == self.hs.server_name else None
        info = c.get("info") if isinstance(c.get("info"), dict) else {}
        self.file_events.append({
            "pos": ev.pos, "room": ev.room, "event_id": ev.event_id, "sender": ev.sender, "source": ev.source,
            "txn_id": ev.txn_id, "msgtype": c.get("msgtype"), "url": url, "body": c.get("body"),
            "filename": c.get("filename"), "info": info, "in_repo": rec is not None,
            "sha256": rec["sha256"] if rec else None, "size": rec["size"] if rec else None,
            "info_size_matches": rec is not None and info.get("size") == rec["size"], **self.hs.when()})
        self.hs.stats["file_events"] += 1

    # ------------------------------------------------------------------ the bench's routes
    async def put(self, req: web.Request) -> web.Response:
        """POST /_independent/media?filename=&emit=&room=&body=&sender=: the raw body into the repository (no auth,
        no size cap but --max-upload-bytes); with `emit`, also an event of that msgtype naming it."""
        q = req.query
        if q.get("emit") not in (None, *FILE_MSGTYPES):
            return reply({"error": f"emit is one of {list(FILE_MSGTYPES)}"}, 400)
        try:
            record = await self.store(req, "bench")
        except Stored as e:
            return reply({"error": e.error}, e.status)
        out: dict[str, Any] = {"ok": True, **record}
        if q.get("emit"):
            try:
                out.update(self.emit({k: q[k] for k in ("room", "body", "sender") if k in q} |
                                     {"media_id": record["media_id"], "msgtype": q["emit"]}))
            except ValueError as e:
                return reply({"error": str(e)}, 400)
        return reply(out)

    async def emit_route(self, req: web.Request) -> web.Response:
        """POST /_independent/media/emit {"media_id"|"content_uri", "msgtype"?, "room"?, "body"?, "sender"?}."""
        try:
            spec = await req.json()
            if not isinstance(spec, dict):
                raise ValueError("body must be a JSON object")
            return reply({"ok": True, **self.emit(spec)})
        except ValueError as e:
            return reply({"error": str(e)}, 400)

    def emit(self, spec: dict[str, Any]) -> dict[str, Any]:
        """An m.room.message naming a file already in the repository, as a client would send it
        (m.room.message$m.file: body, filename, url, info {mimetype, size})."""
        mid = spec.get("media_id") or str(spec.get("content_uri", "")).rsplit("/", 1)[-1]
        rec = self.files.get(mid)
        if rec is None:
            raise ValueError(f"no media {mid!r} in the repository")
        msgtype = spec.get("msgtype", "m.file")
        if msgtype not in FILE_MSGTYPES:
            raise ValueError(f"msgtype is one of {list(FILE_MSGTYPES)}")
        room = self.hs.pick_room(spec)
        name = rec["filename"] or mid
        content: dict[str, Any] = {"msgtype": msgtype, "body": spec.get("body") or name, "filename": name,
                                   "url": rec["content_uri"], "info": {"mimetype": rec["content_type"],
                                                                       "size": rec["size"]}}
        ev = self.hs.append(room, "m.room.message", spec.get("sender", self.hs.peer), content, source="bench")
        return {"room": room, "event_id": ev.event_id, "content_uri": rec["content_uri"],
                "next_batch": self.hs.stream_token(self.hs.head)}

    async def page(self, _req: web.Request) -> web.Response:
        """GET /_independent/media: every file (without its path), every file event, every download."""
        files = [{k: v for k, v in r.items() if k != "path"} for r in self.files.values()]
        return reply({"files": files, "file_events": self.file_events, "downloads": self.downloads})


def add_routes(app: web.Application, repo: MediaRepo) -> None:
    r = app.router
    r.add_post("/_matrix/media/v3/upload", repo.upload)
    r.add_get("/_matrix/client/v1/media/config", repo.config)
    r.add_get("/_matrix/media/v3/config", repo.config)
    r.add_get("/_matrix/client/v1/media/download/{serverName}/{mediaId}", repo.download)
    r.add_get("/_matrix/client/v1/media/download/{serverName}/{mediaId}/{fileName}", repo.download)
    r.add_get("/_matrix/media/v3/download/{serverName}/{mediaId}", repo.frozen)
    r.add_get("/_matrix/media/v3/download/{serverName}/{mediaId}/{fileName}", repo.frozen)
    r.add_post("/_independent/media", repo.put)
    r.add_post("/_independent/media/emit", repo.emit_route)
    r.add_get("/_independent/media", repo.page)
