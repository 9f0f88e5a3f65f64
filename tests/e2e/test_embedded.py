"""Issue 3 §3.3: no config file -> providers and keys from the environment, numbered
siblings in number order; a provider without a key passes the client's credential
through, with backoff keyed by a hash of it."""
import json
import socket

import aortest
from aortest import check, eq


def port_free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def test_embedded_default_from_environment(env):
    if not port_free(8787):
        raise aortest.Skip("127.0.0.1:8787 is in use (the embedded default listens there)")
    env.set_keys(OPENAI_API_KEY="sk-one", OPENAI_API_KEY_3="sk-three", OPENAI_API_KEY_2="sk-two")
    d = env.start_daemon(fake_clock=1800000000)
    st = d.state()
    openai = [k for k in st["keys"] if k["provider"] == "openai"]
    eq(len(openai), 3, "three OpenAI keys")
    eq([k["priority"] for k in openai], sorted(k["priority"] for k in openai), "number order")
    provs = {p["name"]: p for p in st["providers"]}
    check(provs["anthropic"]["passthrough"], "anthropic without a key passes through")
    check("sk-one" not in json.dumps(st), "no secret in the state")
    # No key for Anthropic: the client's credential goes upstream; the upstream is not
    # reachable from here, which is a transient failure keyed by the credential's hash.
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": []})
    r = env.curl(["https://api.anthropic.com/v1/messages", "-H", "x-api-key: my-own-key",
                  "-H", "anthropic-version: 2023-06-01", "-H", "content-type: application/json",
                  "-d", body])
    eq(r.status, 502, "upstream unreachable")
    rows = [b for b in d.state()["backoff"] if b["provider"] == "anthropic"]
    eq(len(rows), 1, "backoff for the pass-through credential")
    check(rows[0]["key"].startswith("client-") and "my-own-key" not in rows[0]["key"],
          "keyed by a hash: %s" % rows[0]["key"])
    r = env.curl(["https://api.anthropic.com/v1/messages", "-H", "x-api-key: my-own-key",
                  "-H", "anthropic-version: 2023-06-01", "-H", "content-type: application/json",
                  "-d", body])
    eq(r.status, 429, "backed off")
    check("aor_all_backed_off" in r.body, "terminal answer")
    r = env.curl(["https://api.anthropic.com/v1/messages", "-H", "x-api-key: another-key",
                  "-H", "anthropic-version: 2023-06-01", "-H", "content-type: application/json",
                  "-d", body])
    eq(r.status, 502, "another credential is not backed off")
