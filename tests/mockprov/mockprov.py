#!/usr/bin/env python3
"""mockprov — a scriptable mock LLM provider for aor's tests (Python 3 stdlib only).

Speaks the OpenAI, Anthropic and Gemini HTTP APIs (success bodies and SSE
streams in the real shapes, see shapes.py), over plain HTTP and TLS with its
own test CA (tlsgen.py), and answers per API key what a test scripted through
a small control API under /_mock/.  The full contract is in
tests/mockprov/README.md.

    python3 tests/mockprov/mockprov.py --port 0 --tls-dir DIR --port-file F
    python3 tests/mockprov/mockprov.py --port 0 --tls-port 0 --tls-dir DIR --port-file F

The port file is written (atomically) once every listener is up: line 1 is the
port of --port, line 2 the port of --tls-port when one was asked for.
"""

import argparse
import collections
import hashlib
import http.server
import json
import os
import signal
import socketserver
import socket
import ssl
import sys
import threading
import time
import traceback
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shapes  # noqa: E402
import tlsgen  # noqa: E402

MAX_BODY = 64 << 20  # bytes; a larger request body gets 413
GATE_TIMEOUT_S = 10.0  # safety: a gated stream goes on after this long
LOG_BODY_MAX = 64 << 10  # bytes of each request body kept in the log
KINDS = (
    "success",
    "sse_error_first",
    "sse_error_after",
    "cut_after",
    "end_after",
    "slow_first_byte",
    "html",
    "preset",
    "gated_stream",
    "drop",
)
ENTRY_FIELDS = {
    "status", "headers", "body", "body_text", "content_type", "times", "kind", "events",
    "gate", "gate_after", "delay_ms", "interval_ms", "name", "error", "sse_sep",
}  # fmt: skip
JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream; charset=utf-8"
FRAMING_HEADERS = {"content-length", "transfer-encoding", "connection"}
DEFAULT_FIXTURES = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "provider-answers.json"
)

VERBOSE = False


def vlog(msg):
    if VERBOSE:
        sys.stderr.write("mockprov: %s\n" % msg)
        sys.stderr.flush()


def _jbytes(obj):
    return json.dumps(obj).encode()


def key_tag(key):
    """A short, non-reversible tag for a key in log lines (never the key itself)."""
    if not key:
        return "-"
    return hashlib.sha256(key.encode()).hexdigest()[:8]


# --- scripts, log, gates ------------------------------------------------------


class ScriptError(ValueError):
    """A scripted answer is malformed; the message names the field."""


def _int_field(e, name, where, minimum, default=None):
    v = e.get(name, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ScriptError("%s: %s must be an integer >= %d, got %r" % (where, name, minimum, v))
    return v


def validate_entry(e, i, fixtures):
    """Check one scripted answer; returns a normalised copy or raises ScriptError."""
    where = "responses[%d]" % i
    if not isinstance(e, dict):
        raise ScriptError("%s: must be an object" % where)
    unknown = sorted(set(e) - ENTRY_FIELDS)
    if unknown:
        raise ScriptError(
            "%s: unknown field(s) %s (known: %s)"
            % (where, ", ".join(unknown), ", ".join(sorted(ENTRY_FIELDS)))
        )
    out = dict(e)
    kind = e.get("kind", "success")
    if kind not in KINDS:
        raise ScriptError("%s: unknown kind %r (known: %s)" % (where, kind, ", ".join(KINDS)))
    out["kind"] = kind
    status = _int_field(e, "status", where, 100)
    if status is not None and status > 999:
        raise ScriptError("%s: status must be 100..999, got %d" % (where, status))
    times = e.get("times", 1)
    if isinstance(times, bool) or not isinstance(times, int) or (times < 1 and times != -1):
        raise ScriptError("%s: times must be >= 1 or -1 (forever), got %r" % (where, times))
    out["times"] = times
    hdrs = e.get("headers", {})
    if not isinstance(hdrs, dict):
        raise ScriptError("%s: headers must be an object of name: value" % where)
    norm = {}
    for k, v in hdrs.items():
        vals = v if isinstance(v, list) else [v]
        if not all(isinstance(x, (str, int, float)) for x in vals):
            raise ScriptError("%s: header %r must be a string or a list of strings" % (where, k))
        norm[str(k).lower()] = [str(x) for x in vals]
    out["headers"] = norm
    if "body" in e and "body_text" in e:
        raise ScriptError("%s: give body or body_text, not both" % where)
    if "body_text" in e and not isinstance(e["body_text"], str):
        raise ScriptError("%s: body_text must be a string" % where)
    if "sse_sep" in e and (not isinstance(e["sse_sep"], str) or
                           e["sse_sep"] not in ("\n\n", "\r\n\r\n", "\n\r\n", "\r\n\n", "\r\r")):
        raise ScriptError("%s: sse_sep must be one of \\n\\n, \\r\\n\\r\\n, \\n\\r\\n, "
                          "\\r\\n\\n, \\r\\r" % where)
    _int_field(e, "delay_ms", where, 0)
    _int_field(e, "interval_ms", where, 0)
    _int_field(e, "gate_after", where, 0)
    _int_field(e, "events", where, 0)
    if kind == "cut_after" and "events" not in e:
        raise ScriptError("%s: cut_after needs events (how many events to send)" % where)
    if kind == "end_after" and "events" not in e:
        raise ScriptError("%s: end_after needs events (how many events to send)" % where)
    if kind == "sse_error_after" and "events" not in e:
        raise ScriptError("%s: sse_error_after needs events" % where)
    if kind == "slow_first_byte" and "delay_ms" not in e:
        raise ScriptError("%s: slow_first_byte needs delay_ms" % where)
    if kind == "gated_stream" and not isinstance(e.get("gate"), str):
        raise ScriptError("%s: gated_stream needs gate (a name)" % where)
    if kind == "preset":
        name = e.get("name")
        if name not in fixtures:
            raise ScriptError(
                "%s: no fixture case named %r (have: %s)"
                % (where, name, ", ".join(sorted(fixtures)))
            )
    if "error" in e and not isinstance(e["error"], dict):
        raise ScriptError("%s: error must be an object (the error event's JSON)" % where)
    return out


class State:
    """Everything the handler threads share: script queues, request log, gates."""

    def __init__(self, fixtures, log_max):
        self.lock = threading.Lock()
        self.scripts = {}  # key -> list of entries, each with "left"
        self.log = collections.deque(maxlen=log_max)
        self.seq = 0
        self.conns = 0  # connections accepted so far (both listeners)
        self.gates = {}  # name -> threading.Event
        self.fixtures = fixtures

    def set_script(self, key, responses, append):
        entries = [validate_entry(e, i, self.fixtures) for i, e in enumerate(responses)]
        for e in entries:
            e["left"] = e["times"]
        with self.lock:
            q = self.scripts.setdefault(key, []) if append else []
            q.extend(entries)
            self.scripts[key] = q
            return len(q)

    def take(self, key):
        """Pops the next scripted answer for key (then for "*"); None = default."""
        with self.lock:
            for k in (key, "*"):
                q = self.scripts.get(k)
                if q:
                    e = q[0]
                    if e["left"] > 0:
                        e["left"] -= 1
                        if e["left"] == 0:
                            q.pop(0)
                    return e
        return None

    def next_conn(self):
        with self.lock:
            self.conns += 1
            return self.conns

    def next_seq(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def add_log(self, rec):
        with self.lock:
            self.log.append(rec)

    def log_since(self, since):
        with self.lock:
            return [r for r in self.log if r["seq"] > since]

    def reset(self):
        with self.lock:
            self.scripts.clear()
            self.log.clear()
            for ev in self.gates.values():
                ev.set()  # release anything still waiting
            self.gates.clear()

    def gate(self, name):
        with self.lock:
            ev = self.gates.get(name)
            if ev is None:
                ev = self.gates[name] = threading.Event()
            return ev

    def pending(self):
        with self.lock:
            return {k: [dict(e) for e in q] for k, q in self.scripts.items() if q}


def load_fixtures(path):
    """Fixture cases by name; a missing file gives an empty table (presets then fail)."""
    try:
        with open(path) as f:
            return {c["name"]: c for c in json.load(f).get("cases", [])}
    except FileNotFoundError:
        return {}


# --- request handling ---------------------------------------------------------


def identify_key(headers, query):
    """(key, where) from Authorization: Bearer, x-api-key, x-goog-api-key or ?key=."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip(), "bearer"
    for h in ("x-api-key", "x-goog-api-key"):
        if h in headers:
            return headers[h].strip(), h
    qk = query.get("key")
    if qk:
        return qk[0], "query"
    return None, None


MODEL_REQUIRED = {"chat", "responses", "completions", "embeddings", "messages", "count_tokens"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mockprov/1"
    sys_version = ""
    timeout = 600  # s an idle keep-alive connection is kept
    disable_nagle_algorithm = True  # each SSE event leaves at once

    def version_string(self):
        return self.server_version

    def setup(self):
        super().setup()
        self.conn_id = self.server.state.next_conn()  # "conn" in the log

    def log_request(self, code="-", size="-"):
        pass  # provider() logs each request itself (without the key)

    def log_message(self, fmt, *args):
        vlog("%s %s" % (self.address_string(), fmt % args))

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

    # -- framing helpers

    def _headers_lc(self):
        out = {}
        for k, v in self.headers.items():
            k = k.lower()
            out[k] = out[k] + ", " + v if k in out else v
        return out

    def _read_body(self):
        """The request body (bytes) or None after answering 400/413 itself."""
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            parts, total = [], 0
            while True:
                line = self.rfile.readline(1024)
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    self._plain_error(400, "bad chunk size line")
                    return None
                if size == 0:
                    while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                total += size
                if total > MAX_BODY:
                    self._plain_error(413, "request body over %d bytes" % MAX_BODY)
                    return None
                parts.append(self.rfile.read(size))
                self.rfile.readline(8)
        cl = self.headers.get("Content-Length")
        if cl is None:
            return b""
        try:
            n = int(cl)
            if n < 0:
                raise ValueError
        except ValueError:
            self._plain_error(400, "bad Content-Length %r" % cl)
            return None
        if n > MAX_BODY:
            self._plain_error(413, "request body over %d bytes" % MAX_BODY)
            return None
        return self.rfile.read(n)

    def _plain_error(self, status, msg):
        self.close_connection = True
        self._send_full(status, {"content-type": ["text/plain"]}, (msg + "\n").encode())

    def _start(self, status, headers, length=None):
        """Status line + headers.  length None = chunked (HTTP/1.1) or close-delimited."""
        reason = "Overloaded" if status == 529 else None
        self.send_response(status, reason)
        for k, vals in headers.items():
            if k in FRAMING_HEADERS:
                continue
            for v in vals:
                self.send_header(k, v)
        self._chunked = False
        if length is not None:
            self.send_header("Content-Length", str(length))
        elif self.request_version == "HTTP/1.1":
            self.send_header("Transfer-Encoding", "chunked")
            self._chunked = True
        else:
            self.close_connection = True
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()

    def _write(self, data):
        if self._chunked:
            if data:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            self.wfile.write(data)

    def _end(self):
        if self._chunked:
            self.wfile.write(b"0\r\n\r\n")

    def _send_full(self, status, headers, body):
        self._start(status, headers, len(body))
        self.wfile.write(body)

    def _json(self, status, obj, extra=None):
        h = {"content-type": ["application/json"]}
        if extra:
            h.update(extra)
        self._send_full(status, h, json.dumps(obj).encode())

    # -- dispatch

    def dispatch(self):
        st = self.server.state
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, urllib.parse.parse_qs(url.query, keep_blank_values=True)
        body = self._read_body()
        if body is None:
            return
        if path.startswith("/_mock/"):
            self.control(st, path, query, body)
        else:
            self.provider(st, path, url.query, query, body)

    def control(self, st, path, query, body):
        cmd = path[len("/_mock/") :]
        try:
            req = json.loads(body) if body.strip() else {}
        except ValueError as e:
            return self._json(400, {"error": "body is not JSON: %s" % e})
        if cmd == "health":
            return self._json(200, {"ok": True})
        if cmd == "script" and self.command == "POST":
            key, responses = req.get("key"), req.get("responses")
            if not isinstance(key, str) or not isinstance(responses, list):
                return self._json(400, {"error": 'need {"key": str, "responses": [..]}'})
            try:
                n = st.set_script(key, responses, bool(req.get("append")))
            except ScriptError as e:
                return self._json(400, {"error": str(e)})
            return self._json(200, {"ok": True, "queued": n})
        if cmd == "script":
            return self._json(200, st.pending())
        if cmd == "reset" and self.command == "POST":
            st.reset()
            return self._json(200, {"ok": True})
        if cmd == "log":
            try:
                since = int(query.get("since", ["0"])[0])
            except ValueError:
                return self._json(400, {"error": "since must be an integer"})
            return self._json(200, st.log_since(since))
        if cmd == "gate" and self.command == "POST":
            name = query.get("name", [req.get("name")])[0]
            if not isinstance(name, str) or not name:
                return self._json(400, {"error": "gate needs ?name=NAME"})
            ev = st.gate(name)
            if query.get("close", ["0"])[0] == "1":
                ev.clear()  # re-arm: later gated streams wait again
            else:
                ev.set()
            return self._json(200, {"ok": True})
        return self._json(404, {"error": "no control route %s %s" % (self.command, path)})

    def provider(self, st, path, rawq, query, body):
        at = time.time()
        hdrs = self._headers_lc()
        key, key_from = identify_key(hdrs, query)
        dialect, endpoint, path_model = shapes.route(path, hdrs)
        req, bad_json = {}, False
        if body.strip():
            try:
                parsed = json.loads(body)
                req = parsed if isinstance(parsed, dict) else {}
            except ValueError:
                bad_json = True
        model = path_model or (req.get("model") if isinstance(req.get("model"), str) else None)
        sse_mode = True
        if endpoint == "g_stream":
            stream = True
            sse_mode = query.get("alt", [""])[0] == "sse"
        else:
            stream = req.get("stream") is True
        seq = st.next_seq()
        entry = st.take(key or "")
        ctx = {
            "dialect": dialect or shapes.dialect_of_path(path),
            "endpoint": endpoint,
            "model": model or "unknown-model",
            "model_given": bool(model),
            "req": req,
            "req_len": len(body),
            "seq": seq,
            "stream": stream,
            "sse_mode": sse_mode,
        }
        plan = self.plan(st, entry, ctx, bad_json)
        rec = {
            "seq": seq,
            "conn": self.conn_id,
            "key": key,
            "key_from": key_from,
            "method": self.command,
            "path": path,
            "query": rawq,
            "model": model,
            "stream": stream,
            "status": plan["status"],
            "kind": entry["kind"] if entry else None,
            "at": at,
            "headers": hdrs,
            "body": body[:LOG_BODY_MAX].decode("utf-8", "replace"),
            "body_len": len(body),
        }
        st.add_log(rec)
        vlog(
            "#%d %s %s key=%s model=%s stream=%s -> %s %s"
            % (seq, self.command, path, key_tag(key), model, stream, plan["status"], rec["kind"])
        )
        self.execute(st, plan, ctx)

    # -- deciding and sending an answer

    def plan(self, st, entry, ctx, bad_json):
        """What to answer: {"status", "mode", "headers", "body", "entry"}.

        mode: full (status + body), stream (SSE), cut_full (half a JSON body,
        then close), drop (close without an answer).  Decided before anything
        is sent so the log holds the status before the client sees it.
        """
        e = entry or {"kind": "success", "headers": {}}
        seq = ctx["seq"]
        h = {"x-request-id": ["req_mock%d" % seq], "x-mock-seq": [str(seq)]}
        if ctx["dialect"] == "anthropic":
            h["request-id"] = ["req_mock%d" % seq]
        if e["kind"] == "preset":
            case_h = st.fixtures[e["name"]].get("headers", {})
            h.update({k.lower(): [str(v)] for k, v in case_h.items()})
        h.update(e["headers"])
        p = {"entry": e, "headers": h, "body": None}
        kind = e["kind"]
        if kind == "drop":
            return dict(p, status=0, mode="drop")
        if kind in ("sse_error_first", "sse_error_after", "gated_stream"):
            return dict(p, status=200, mode="stream")
        if kind == "cut_after":
            return dict(p, status=200, mode="stream" if ctx["stream"] else "cut_full")
        status, ctype, body = self._answer(st, e, ctx, bad_json)
        if body is None:
            return dict(p, status=200, mode="stream")
        h.setdefault("content-type", [ctype])
        return dict(p, status=status, mode="full", body=body)

    def _answer(self, st, e, ctx, bad_json):
        """(status, content-type, body bytes) of a whole answer; body None = stream it."""
        dialect, ep = ctx["dialect"], ctx["endpoint"]
        if e["kind"] == "preset":
            case = st.fixtures[e["name"]]
            status = e.get("status", case["status"])
            if "body_text" in case:
                return status, "text/plain", case["body_text"].encode()
            return status, JSON_TYPE, _jbytes(case.get("body", {}))
        if e["kind"] == "html":
            return e.get("status", 200), "text/html; charset=utf-8", shapes.HTML_PAGE
        status = e.get("status", 200)
        if "body" in e:
            return status, e.get("content_type", JSON_TYPE), _jbytes(e["body"])
        if "body_text" in e:
            return status, e.get("content_type", "text/plain"), e["body_text"].encode()
        if status != 200:
            return status, JSON_TYPE, _jbytes(shapes.error_body(dialect, status))
        if ep is None:
            why = "mockprov: no such endpoint %s" % self.path.split("?")[0]
            return 404, JSON_TYPE, _jbytes(shapes.error_body(dialect, 404, why))
        if bad_json or (ep in MODEL_REQUIRED and not ctx["model_given"]):
            why = "request body is not valid JSON" if bad_json else "model is required"
            return 400, JSON_TYPE, _jbytes(shapes.error_body(dialect, 400, why))
        if ctx["stream"]:
            return 200, None, None
        if dialect == "anthropic" and ep == "models":
            return 200, JSON_TYPE, _jbytes(shapes.anthropic_models_body())
        n = e.get("events", shapes.DEFAULT_DELTAS)
        obj = shapes.success_body(ep, ctx["model"], ctx["req"], ctx["req_len"], ctx["seq"], n)
        return 200, JSON_TYPE, _jbytes(obj)

    def _events(self, ctx, n, sep=None):
        evs = shapes.stream_events(
            ctx["dialect"], ctx["endpoint"], ctx["model"], ctx["req"], ctx["req_len"],
            ctx["seq"], n, ctx["sse_mode"],
        )  # fmt: skip
        if sep and ctx["sse_mode"]:  # each event's closing "\n\n" written as sep
            end = sep.encode()
            evs = [ev[:-2] + end if ev.endswith(b"\n\n") else ev for ev in evs]
        return evs

    def _stream_plan(self, st, e, ctx):
        """(events, cut, gate) of a stream: cut = events to send before closing
        (None = all, then the terminator); gate = Event to wait for (or None)."""
        kind = e["kind"]
        err = shapes.error_event(ctx["endpoint"], ctx["dialect"], e.get("error"), ctx["sse_mode"])
        if kind == "sse_error_first":
            return [err], None, None
        if kind in ("sse_error_after", "cut_after", "end_after"):
            n = e["events"]
            events = self._events(ctx, max(n, shapes.DEFAULT_DELTAS))
            if kind == "cut_after":
                return events, n, None
            if kind == "end_after":
                return events[:n], None, None
            return events[:n] + [err], None, None
        events = self._events(ctx, e.get("events", shapes.DEFAULT_DELTAS), e.get("sse_sep"))
        return events, None, (st.gate(e["gate"]) if kind == "gated_stream" else None)

    def execute(self, st, p, ctx):
        e = p["entry"]
        if e.get("delay_ms"):
            time.sleep(e["delay_ms"] / 1000.0)
        mode = p["mode"]
        if mode == "drop":
            self.close_connection = True
        elif mode == "full":
            self._send_full(p["status"], p["headers"], p["body"])
        elif mode == "cut_full":
            ep = ctx["endpoint"] or "chat"
            obj = shapes.success_body(ep, ctx["model"], ctx["req"], ctx["req_len"], ctx["seq"])
            body = _jbytes(obj)
            self.close_connection = True
            self._start(200, dict(p["headers"], **{"content-type": [JSON_TYPE]}), len(body))
            self.wfile.write(body[: len(body) // 2])
        else:
            self._stream(st, p, ctx)

    def _stream(self, st, p, ctx):
        e = p["entry"]
        events, cut, gate = self._stream_plan(st, e, ctx)
        gemini_json = ctx["dialect"] == "gemini" and not ctx["sse_mode"]
        h = {
            "content-type": [JSON_TYPE + "; charset=UTF-8" if gemini_json else SSE_TYPE],
            "cache-control": ["no-cache"],
        }
        h.update(p["headers"])
        gate_after = e.get("gate_after", 1)
        interval = e.get("interval_ms", 0) / 1000.0
        self._start(200, h)
        for i, ev in enumerate(events):
            if cut is not None and i >= cut:
                break
            if gate is not None and i == gate_after:
                if not gate.wait(GATE_TIMEOUT_S):
                    vlog("#%d gate %r still closed, going on" % (ctx["seq"], e["gate"]))
            elif interval and i:
                time.sleep(interval)
            self._write(ev)
        if cut is not None:
            self.close_connection = True  # no terminator: the connection just ends
            return
        if gate is not None and gate_after >= len(events):
            # every event out (the stream's own terminator too): the body's end waits
            if not gate.wait(GATE_TIMEOUT_S):
                vlog("#%d gate %r still closed, going on" % (ctx["seq"], e["gate"]))
        self._end()


# --- servers ------------------------------------------------------------------


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024
    allow_reuse_address = True

    def __init__(self, addr, state, tls_ctx=None):
        self.address_family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.state = state
        self.tls_ctx = tls_ctx
        super().__init__(addr, Handler)

    def server_bind(self):
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn) that can
        # hang where there is no DNS; we need no server name.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "localhost", self.server_address[1]

    def finish_request(self, request, client_address):
        if self.tls_ctx is None:
            return super().finish_request(request, client_address)
        # TLS handshake here, in the connection's thread, not in accept().
        request.settimeout(10)
        try:
            tls = self.tls_ctx.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as e:
            vlog("TLS handshake from %s failed: %s" % (client_address[0], e))
            return
        try:
            tls.settimeout(None)
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, TimeoutError, socket.timeout)):
            vlog("connection from %s: %s" % (client_address[0], exc))
            return
        sys.stderr.write("mockprov: internal error handling a request:\n")
        traceback.print_exc()


def main(argv=None):
    global VERBOSE
    ap = argparse.ArgumentParser(description="Scriptable mock LLM provider for aor tests.")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ap.add_argument(
        "--port", type=int, default=0,
        help="port (0 = any free one); TLS when --tls-dir is given without --tls-port",
    )  # fmt: skip
    ap.add_argument("--tls-port", type=int, help="also listen with TLS here (needs --tls-dir)")
    ap.add_argument("--tls-dir", help="directory for the test CA and server cert (created)")
    ap.add_argument("--name", action="append", default=[], help="extra DNS name/IP in the cert")
    ap.add_argument("--port-file", help="write the bound port(s) here once listening")
    ap.add_argument("--fixtures", default=DEFAULT_FIXTURES, help="provider-answers.json (presets)")
    ap.add_argument("--script", help='JSON file {"KEY": [responses...]} loaded at start')
    ap.add_argument("--log-max", type=int, default=20000, help="request log entries kept")
    ap.add_argument("--verbose", action="store_true", help="one stderr line per request")
    ap.add_argument("--parent-pid", type=int, help="exit when this process is gone (test harness)")
    a = ap.parse_args(argv)
    VERBOSE = a.verbose
    if a.tls_port is not None and not a.tls_dir:
        ap.error("--tls-port needs --tls-dir")

    state = State(load_fixtures(a.fixtures), max(1, a.log_max))
    if a.script:
        try:
            with open(a.script) as f:
                for k, resp in json.load(f).items():
                    state.set_script(k, resp, True)
        except (OSError, ValueError) as e:
            sys.stderr.write("mockprov: --script %s: %s\n" % (a.script, e))
            return 2

    ctx = None
    if a.tls_dir:
        try:
            paths = tlsgen.ensure_tls(a.tls_dir, a.name)
        except (OSError, tlsgen.TlsError) as e:
            sys.stderr.write("mockprov: TLS setup in %s failed: %s\n" % (a.tls_dir, e))
            return 1
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(paths["server.pem"], paths["server.key"])
        ctx.set_alpn_protocols(["http/1.1"])

    servers = []
    try:
        if a.tls_port is not None:
            servers.append(Server((a.host, a.port), state))
            servers.append(Server((a.host, a.tls_port), state, ctx))
        else:
            servers.append(Server((a.host, a.port), state, ctx))
    except OSError as e:
        sys.stderr.write("mockprov: cannot listen on %s: %s\n" % (a.host, e))
        return 1

    for s in servers:
        threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()

    ports = [s.server_address[1] for s in servers]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("".join("%d\n" % p for p in ports))
        os.replace(tmp, a.port_file)
    urls = [
        "%s://%s:%d" % ("https" if s.tls_ctx else "http", a.host, p) for s, p in zip(servers, ports)
    ]
    ca_note = " (CA %s)" % os.path.join(a.tls_dir, "ca.pem") if ctx else ""
    sys.stderr.write("mockprov: listening on %s%s\n" % (" ".join(urls), ca_note))
    sys.stderr.flush()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(1.0):
        if a.parent_pid and os.getppid() != a.parent_pid:
            break  # the harness that started us died without stopping us
    for s in servers:
        s.shutdown()
        s.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
