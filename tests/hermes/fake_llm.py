#!/usr/bin/env python3
"""A small OpenAI-compatible model server for tests that run the real Hermes agent.

Standard library only. Usage: fake_llm.py [PORT] [MODEL]
  PORT  0 (default) picks a free port; once listening it prints `PORT <n>` on stdout.
  MODEL the model id it lists and echoes back (default "fake-model").

Serves what hermes-agent 0.19.0 calls:
  GET  /v1/models, /api/v1/models, /models     one model
  POST /v1/chat/completions (and /chat/completions), `stream: true` (SSE chunks, then
       `data: [DONE]`; Hermes's turns) or `stream: false` (its title calls).

The reply is driven by the text of the last user message, without the "[System note: ...]"
blocks Hermes appends to it (on the very first message of a fresh HERMES_HOME, after an
automatic session reset). The triggers below are looked for in its LAST LINE only: Hermes
re-sends a user message that got no answer (a failed or interrupted turn) merged with the
next one ("fail\\n\\nhello"; "a\\nb" for queued follow-ups), and that next message alone
should decide the outcome. The echo shows the whole merged text.
  contains `fail`     HTTP 500 (an OpenAI-style error body); Hermes retries twice
  contains `slow:N`   sleep N seconds (N may be fractional) before answering
  contains `long:N`   reply with exactly N characters: long_text(N), 10-character blocks
                      "0000abcdef0001abcdef..." (4-digit block counter mod 10000, then
                      "abcdef"), so a receiver can check split parts arrived whole and in order
  otherwise           `echo: <text>`
Title-generation calls (Hermes makes one per new session; their system message starts
"Generate a short, descriptive title") are answered at once with "Test Conversation",
whatever the embedded user text says. No tools are ever requested.

Every request is logged as one JSON line on stderr when it arrives (before any slow:N sleep):
  {"ts": <unix seconds>, "method", "path", "last_user" (notes stripped), "kind": "chat" |
   "title" | "models" | "other", "stream", "status", "system_note" (chat/title only: a note
   was stripped), "images" (chat/title only: each image_url part of the last user message
   that is a data URL, as {"mime", "bytes", "sha256"} of the decoded data), "history" (every
   user and assistant message of the request, in order, as {"role", "text"})}
so a test can count model calls (kind == "chat") and check the pixels a model got.

`POST /v1/audio/transcriptions` (OpenAI's speech-to-text: multipart, the recording in the part
named `file`) answers the plain text `TRANSCRIPT sha256=<of the bytes> name=<the part's
filename>` whatever `response_format` asks, and logs kind "transcription" with the same
"sha256" and "filename", so a test can check the bytes a voice note reached Hermes's STT with.
"""

import base64
import email.parser
import email.policy
import hashlib
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = sys.argv[2] if len(sys.argv) > 2 else "fake-model"
TITLE_MARK = "generate a short, descriptive title"
TITLE = "Test Conversation"
CHUNK = 16  # characters per streamed delta
_log_lock = threading.Lock()
_NOTE_RE = re.compile(r"\n*\[System note:.*\Z", re.S)


def long_text(n):
    """Exactly n characters of 10-character blocks `{i:04d}abcdef`, i = 0, 1, 2, ..."""
    return "".join("%04dabcdef" % (i % 10000) for i in range((n + 9) // 10))[:n]


def strip_notes(text):
    """Drop the "\\n\\n[System note: ...]" blocks Hermes appends to a user message (the
    first-contact introduction, an auto-reset notice): only the user's own text counts."""
    return _NOTE_RE.sub("", text)


def _text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def _images_of(content):
    """The data-URL images of a message's content parts: MIME type, size and sha256 of the
    decoded bytes."""
    out = []
    if not isinstance(content, list):
        return out
    for p in content:
        if not isinstance(p, dict) or p.get("type") not in ("image_url", "input_image"):
            continue
        url = p.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
        if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
            continue
        head, data = url.split(",", 1)
        try:
            raw = base64.b64decode(data)
        except ValueError:
            continue
        out.append({"mime": head[5:].split(";", 1)[0], "bytes": len(raw),
                    "sha256": hashlib.sha256(raw).hexdigest()})
    return out


def _log(**fields):
    fields = {"ts": round(time.time(), 3), **fields}
    with _log_lock:
        sys.stderr.write(json.dumps(fields) + "\n")
        sys.stderr.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-llm/1"

    def log_message(self, *args):  # the JSON log line replaces the default access log
        pass

    def _send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def do_GET(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/api/v1/models", "/models"):
            _log(method="GET", path=self.path, last_user=None, kind="models", stream=False, status=200)
            self._send_json(200, {
                "object": "list",
                "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "fake-llm",
                          "context_length": 131072}],
            })
        else:
            _log(method="GET", path=self.path, last_user=None, kind="other", stream=False, status=404)
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

    def _transcribe(self, raw):
        head = f"Content-Type: {self.headers.get('Content-Type', '')}\r\n\r\n".encode()
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        part = next((p for p in msg.iter_parts()
                     if p.get_param("name", header="content-disposition") == "file"), None)
        if part is None:
            _log(method="POST", path=self.path, last_user=None, kind="transcription", status=400)
            self._send_json(400, {"error": {"message": "no file part", "type": "invalid_request_error"}})
            return
        data = part.get_payload(decode=True) or b""
        digest, name = hashlib.sha256(data).hexdigest(), part.get_filename()
        _log(method="POST", path=self.path, last_user=None, kind="transcription", status=200,
             sha256=digest, filename=name, bytes=len(data))
        body = f"TRANSCRIPT sha256={digest} name={name}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        raw = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/audio/transcriptions", "/audio/transcriptions"):
            self._transcribe(raw)
            return
        if path not in ("/v1/chat/completions", "/chat/completions"):
            _log(method="POST", path=self.path, last_user=None, kind="other", stream=False, status=404)
            self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})
            return
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            _log(method="POST", path=self.path, last_user=None, kind="other", stream=False, status=400)
            self._send_json(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
            return
        messages = req.get("messages") or []
        stream = bool(req.get("stream"))
        model = req.get("model") or MODEL
        raw_user = ""
        images = []
        for m in reversed(messages):
            if isinstance(m, dict) and m.get("role") == "user":
                raw_user = _text_of(m.get("content"))
                images = _images_of(m.get("content"))
                break
        last_user = strip_notes(raw_user)
        is_title = any(
            isinstance(m, dict) and m.get("role") == "system"
            and _text_of(m.get("content")).strip().lower().startswith(TITLE_MARK)
            for m in messages
        )
        # Every user and assistant turn the request holds, in order: what the model was
        # given of the conversation so far.
        history = [
            {"role": m.get("role"), "text": strip_notes(_text_of(m.get("content")))}
            for m in messages
            if isinstance(m, dict) and m.get("role") in ("user", "assistant")
        ]
        log = dict(method="POST", path=self.path, last_user=last_user,
                   kind="title" if is_title else "chat", stream=stream,
                   system_note=last_user != raw_user, images=images, history=history)

        if is_title:
            _log(status=200, **log)
            reply = TITLE
        else:
            trigger = last_user.rsplit("\n", 1)[-1]
            if "fail" in trigger:
                _log(status=500, **log)
                self._send_json(500, {"error": {"message": "fake-llm: failure requested",
                                                "type": "server_error", "code": "fake_failure"}})
                return
            _log(status=200, **log)
            m = re.search(r"slow:(\d+(?:\.\d+)?)", trigger)
            if m:
                time.sleep(float(m.group(1)))
            m = re.search(r"long:(\d+)", trigger)
            reply = long_text(int(m.group(1))) if m else "echo: " + last_user

        cid = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": max(1, len(reply) // 4),
                 "total_tokens": 10 + max(1, len(reply) // 4)}
        try:
            if not stream:
                self._send_json(200, {
                    "id": cid, "object": "chat.completion", "created": created, "model": model,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply}}],
                    "usage": usage,
                })
                return

            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def event(obj):
                data = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

            def chunk(delta, finish=None):
                return {"id": cid, "object": "chat.completion.chunk", "created": created,
                        "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

            event(chunk({"role": "assistant", "content": ""}))
            for i in range(0, len(reply), CHUNK):
                event(chunk({"content": reply[i:i + CHUNK]}))
            event(chunk({}, "stop"))
            if (req.get("stream_options") or {}).get("include_usage"):
                event({"id": cid, "object": "chat.completion.chunk", "created": created,
                       "model": model, "choices": [], "usage": usage})
            event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (an interrupted turn)


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
