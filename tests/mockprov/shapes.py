"""Answer shapes of the three provider dialects, as the real APIs send them.

Pure functions, no I/O: the server (mockprov.py) decides *what* to answer,
this module builds the bytes.  Shapes follow the public API references:
OpenAI Chat Completions / Responses / Completions / Embeddings / Models,
Anthropic Messages (+ count_tokens, streaming events), Gemini
generateContent / streamGenerateContent (alt=sse and JSON-array streaming).

Endpoint names used throughout:
  openai:    chat, responses, completions, embeddings, models, model
  anthropic: messages, count_tokens, models (same path as OpenAI's list)
  gemini:    g_generate, g_stream, g_count, g_embed, g_models
"""

import json
import re
import time

WORDS = ["Hello", " from", " the", " mock", " provider", "."]
DEFAULT_DELTAS = 3
KNOWN_MODELS = {
    "openai": ["gpt-4o", "gpt-4o-mini", "text-embedding-3-small"],
    "anthropic": ["claude-sonnet-4-5", "claude-haiku-4-5"],
    "gemini": ["gemini-2.5-flash", "gemini-2.5-pro"],
}

_GEMINI_RE = re.compile(r"/models/([^/:]+):([A-Za-z]+)$")


def route(path, headers):
    """Map a request path (no query) to (dialect, endpoint, model_from_path).

    Matches by suffix so base paths with a prefix (OpenRouter's /api/v1/...)
    work too.  Returns (None, None, None) for an unknown path.
    `headers` (lower-case names) tells the Anthropic models list from OpenAI's.
    """
    m = _GEMINI_RE.search(path)
    if m:
        model, method = m.group(1), m.group(2)
        ep = {
            "generateContent": "g_generate",
            "streamGenerateContent": "g_stream",
            "countTokens": "g_count",
            "embedContent": "g_embed",
        }.get(method)
        return ("gemini", ep, model) if ep else (None, None, None)
    if path.endswith("/chat/completions"):
        return "openai", "chat", None
    if path.endswith("/responses"):
        return "openai", "responses", None
    if path.endswith("/completions"):
        return "openai", "completions", None
    if path.endswith("/embeddings"):
        return "openai", "embeddings", None
    if path.endswith("/messages/count_tokens"):
        return "anthropic", "count_tokens", None
    if path.endswith("/messages"):
        return "anthropic", "messages", None
    if path.endswith("/models"):
        if "/v1beta/" in path:
            return "gemini", "g_models", None
        if "anthropic-version" in headers or "x-api-key" in headers:
            return "anthropic", "models", None
        return "openai", "models", None
    m = re.search(r"/models/([^/:]+)$", path)
    if m and "/v1beta/" not in path:
        return "openai", "model", m.group(1)
    return None, None, None


def dialect_of_path(path):
    """Best-effort dialect for a path nobody routes (for error shapes)."""
    if "/v1beta/" in path or ":generateContent" in path:
        return "gemini"
    if "/messages" in path:
        return "anthropic"
    return "openai"


def text_of(n):
    """The full answer text for n deltas (the words cycle)."""
    return "".join(WORDS[i % len(WORDS)] for i in range(n))


def _dumps(obj):
    return json.dumps(obj, separators=(",", ":"))


def _tokens(req_len):
    return max(1, req_len // 4)


# --- non-streaming bodies ---------------------------------------------------


def success_body(endpoint, model, req, req_len, seq, n=DEFAULT_DELTAS):
    """JSON-able success body for `endpoint`, echoing `model`.

    req: the parsed request JSON (dict, possibly empty); req_len: request body
    length in bytes (drives the usage numbers); seq: request number (ids).
    """
    now = int(time.time())
    text = text_of(n)
    pt = _tokens(req_len)
    if endpoint == "chat":
        return {
            "id": "chatcmpl-mock%d" % seq,
            "object": "chat.completion",
            "created": now,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": pt, "completion_tokens": n, "total_tokens": pt + n},
            "system_fingerprint": "fp_mock",
        }
    if endpoint == "responses":
        return _response_obj(model, seq, now, "completed", text, pt, n)
    if endpoint == "completions":
        return {
            "id": "cmpl-mock%d" % seq,
            "object": "text_completion",
            "created": now,
            "model": model,
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": pt, "completion_tokens": n, "total_tokens": pt + n},
        }
    if endpoint == "embeddings":
        inp = req.get("input", "")
        count = len(inp) if isinstance(inp, list) and inp and not isinstance(inp[0], int) else 1
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": [0.125 * (i + 1)] * 8}
                for i in range(count)
            ],
            "model": model,
            "usage": {"prompt_tokens": pt, "total_tokens": pt},
        }
    if endpoint == "models":
        return {
            "object": "list",
            "data": [
                {"id": m, "object": "model", "created": 1700000000, "owned_by": "mockprov"}
                for m in KNOWN_MODELS["openai"]
            ],
        }
    if endpoint == "model":
        return {"id": model, "object": "model", "created": 1700000000, "owned_by": "mockprov"}
    if endpoint == "messages":
        return {
            "id": "msg_mock%d" % seq,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": pt, "output_tokens": n},
        }
    if endpoint == "count_tokens":
        return {"input_tokens": pt}
    if endpoint == "g_generate" or endpoint == "g_stream":
        return _gemini_chunk(model, text, pt, n, final=True)
    if endpoint == "g_count":
        return {"totalTokens": pt}
    if endpoint == "g_embed":
        return {"embedding": {"values": [0.125] * 8}}
    if endpoint == "g_models":
        return {
            "models": [
                {
                    "name": "models/" + m,
                    "displayName": m,
                    "supportedGenerationMethods": ["generateContent", "countTokens"],
                }
                for m in KNOWN_MODELS["gemini"]
            ]
        }
    raise ValueError("no success shape for endpoint %r" % endpoint)


def anthropic_models_body():
    """Anthropic's GET /v1/models list shape."""
    data = [
        {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
        for m in KNOWN_MODELS["anthropic"]
    ]
    return {"data": data, "has_more": False, "first_id": data[0]["id"], "last_id": data[-1]["id"]}


def _response_obj(model, seq, now, status, text, pt, n):
    out = []
    if status == "completed":
        out = [
            {
                "type": "message",
                "id": "msg_mock%d" % seq,
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ]
    return {
        "id": "resp_mock%d" % seq,
        "object": "response",
        "created_at": now,
        "status": status,
        "model": model,
        "output": out,
        "usage": (
            {"input_tokens": pt, "output_tokens": n, "total_tokens": pt + n}
            if status == "completed"
            else None
        ),
        "error": None,
    }


def _gemini_chunk(model, text, pt, n, final):
    cand = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if final:
        cand["finishReason"] = "STOP"
    out = {"candidates": [cand], "modelVersion": model}
    usage = {"promptTokenCount": pt}
    if final:
        usage.update({"candidatesTokenCount": n, "totalTokenCount": pt + n})
    out["usageMetadata"] = usage
    return out


# --- error bodies -----------------------------------------------------------

_OPENAI_ERR = {
    400: ("Invalid request.", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    402: ("Payment required.", "insufficient_quota", "insufficient_quota"),
    403: ("You are not allowed to access this resource.", "invalid_request_error", None),
    404: ("The requested resource was not found.", "invalid_request_error", "not_found"),
    429: ("Rate limit reached for requests.", "requests", "rate_limit_exceeded"),
}
_ANTHROPIC_ERR = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(dialect, status, message=None):
    """The dialect's error JSON for an HTTP status (a plausible default)."""
    if dialect == "anthropic":
        fallback = "api_error" if status >= 500 else "invalid_request_error"
        etype = _ANTHROPIC_ERR.get(status, fallback)
        msg = message or ("Overloaded" if etype == "overloaded_error" else "mock %s" % etype)
        return {"type": "error", "error": {"type": etype, "message": msg}, "request_id": "req_mock"}
    if dialect == "gemini":
        st = _GEMINI_STATUS.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
        return {"error": {"code": status, "message": message or "mock %s" % st, "status": st}}
    msg, etype, code = _OPENAI_ERR.get(
        status,
        (
            "The server had an error while processing your request.",
            "server_error" if status >= 500 else "invalid_request_error",
            None,
        ),
    )
    return {"error": {"message": message or msg, "type": etype, "param": None, "code": code}}


# --- streams ----------------------------------------------------------------


def sse(data, event=None, sep="\n\n"):
    """One SSE event as bytes; data is a JSON-able object or a raw string."""
    payload = data if isinstance(data, str) else _dumps(data)
    head = "event: %s\n" % event if event else ""
    return (head + "data: " + payload + sep).encode()


def stream_events(dialect, endpoint, model, req, req_len, seq, n, sse_mode=True):
    """The full list of stream events (bytes each) for a successful stream.

    Endpoints without a stream of their own (embeddings, count_tokens, ...)
    get their dialect's chat-style stream.  n = number of content deltas.
    Each element is one SSE event (for Gemini
    without alt=sse: one piece of the JSON array).  The list ends with the
    dialect's terminator where it has one ([DONE], message_stop,
    response.completed); Gemini's stream simply ends.
    """
    now = int(time.time())
    pt = _tokens(req_len)
    words = [WORDS[i % len(WORDS)] for i in range(n)]
    if dialect == "anthropic":
        return _anthropic_stream(model, seq, pt, words)
    if dialect == "gemini":
        return _gemini_stream(model, pt, words, sse_mode)
    if endpoint == "responses":
        return _responses_stream(model, seq, now, pt, words)
    if endpoint == "completions":
        return _completions_stream(model, seq, now, words)
    return _chat_stream(model, seq, now, pt, words, req)


def _chat_stream(model, seq, now, pt, words, req):
    base = {
        "id": "chatcmpl-mock%d" % seq,
        "object": "chat.completion.chunk",
        "created": now,
        "model": model,
        "system_fingerprint": "fp_mock",
    }

    def chunk(delta, finish=None):
        c = dict(base)
        c["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return sse(c)

    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"content": w}) for w in words]
    out.append(chunk({}, "stop"))
    opts = req.get("stream_options") if isinstance(req, dict) else None
    if isinstance(opts, dict) and opts.get("include_usage"):
        u = dict(base)
        u["choices"] = []
        u["usage"] = {
            "prompt_tokens": pt,
            "completion_tokens": len(words),
            "total_tokens": pt + len(words),
        }
        out.append(sse(u))
    out.append(sse("[DONE]"))
    return out


def _completions_stream(model, seq, now, words):
    def chunk(text, finish=None):
        return sse(
            {
                "id": "cmpl-mock%d" % seq,
                "object": "text_completion",
                "created": now,
                "model": model,
                "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}],
            }
        )

    return [chunk(w) for w in words] + [chunk("", "stop"), sse("[DONE]")]


def _anthropic_stream(model, seq, pt, words):
    msg = {
        "id": "msg_mock%d" % seq,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": pt, "output_tokens": 1},
    }
    out = [
        sse({"type": "message_start", "message": msg}, "message_start"),
        sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        ),
        sse({"type": "ping"}, "ping"),
    ]
    out += [
        sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}},
            "content_block_delta",
        )
        for w in words
    ]
    out += [
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(words)},
            },
            "message_delta",
        ),
        sse({"type": "message_stop"}, "message_stop"),
    ]
    return out


def _responses_stream(model, seq, now, pt, words):
    n = [0]
    item_id = "msg_mock%d" % seq

    def ev(etype, **kw):
        d = {"type": etype, "sequence_number": n[0]}
        d.update(kw)
        n[0] += 1
        return sse(d, etype)

    text = "".join(words)
    item_start = {
        "type": "message",
        "id": item_id,
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    part_done = {"type": "output_text", "text": text, "annotations": []}
    item_done = dict(item_start, status="completed", content=[part_done])
    pending = _response_obj(model, seq, now, "in_progress", "", pt, 0)
    where = {"item_id": item_id, "output_index": 0, "content_index": 0}
    out = [
        ev("response.created", response=pending),
        ev("response.in_progress", response=pending),
        ev("response.output_item.added", output_index=0, item=item_start),
        ev(
            "response.content_part.added",
            item_id=item_id,
            output_index=0,
            content_index=0,
            part={"type": "output_text", "text": "", "annotations": []},
        ),
    ]
    out += [
        ev(
            "response.output_text.delta",
            item_id=item_id,
            output_index=0,
            content_index=0,
            delta=w,
        )
        for w in words
    ]
    out += [
        ev("response.output_text.done", text=text, **where),
        ev("response.content_part.done", part=part_done, **where),
        ev("response.output_item.done", output_index=0, item=item_done),
        ev(
            "response.completed",
            response=_response_obj(model, seq, now, "completed", text, pt, len(words)),
        ),
    ]
    return out


def _gemini_stream(model, pt, words, sse_mode):
    chunks = [
        _gemini_chunk(model, w, pt, len(words), final=(i == len(words) - 1))
        for i, w in enumerate(words)
    ]
    if not chunks:
        chunks = [_gemini_chunk(model, "", pt, 0, final=True)]
    if sse_mode:
        return [sse(c, sep="\r\n\r\n") for c in chunks]
    # Without alt=sse Gemini streams one JSON array, element by element.
    out = []
    for i, c in enumerate(chunks):
        out.append(((",\r\n" if i else "[") + _dumps(c)).encode())
    out.append(b"]")
    return out


def error_event(endpoint, dialect, body=None, sse_mode=True):
    """An in-stream error event of the dialect (as the APIs send mid-stream).

    body: a custom error object to send instead of the default one.
    """
    if dialect == "anthropic":
        return sse(body or error_body("anthropic", 529), "error")
    if dialect == "gemini":
        b = body or error_body("gemini", 503, "The model is overloaded. Please try again later.")
        return sse(b, sep="\r\n\r\n") if sse_mode else ("[" + _dumps(b) + "]").encode()
    if endpoint == "responses":
        b = body or {
            "type": "error",
            "code": "server_error",
            "message": "The server had an error while processing your request.",
            "param": None,
            "sequence_number": 0,
        }
        return sse(b, "error")
    return sse(body or error_body("openai", 500))


HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Welcome</title></head>"
    b"<body><h1>It works!</h1><p>This is not an API.</p></body></html>\n"
)
