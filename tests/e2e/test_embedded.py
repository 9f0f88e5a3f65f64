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


def test_sighup_after_the_implicit_file_is_removed(env):
    """QA: removing $XDG_CONFIG_HOME/aor/aor.ini and reloading logged "the config file has
    no providers now": the file is gone, and the log must say so. The ready line counts
    in the singular for one ("1 provider, 1 key")."""
    import os
    import signal
    env.set_keys(KEY_A="sk-embedded-test-AAAA")
    port = aortest.free_port()
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "A"]
        env = KEY_A
        [provider "openai"]
        keys = A
        models = *
        """)
    d = env.start_daemon()
    log = d.stderr_text()
    check("1 provider, 1 key, config %s" % env.config_path in log,
          "ready line in the singular: %s" % log[-400:])
    os.unlink(env.config_path)
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: "config reloaded" in d.stderr_text(), what="reload logged")
    log = d.stderr_text()
    check("SIGHUP: the config file %s is gone; the embedded default now applies" % env.config_path
          in log, "the log says the file is gone: %s" % log[-600:])
    check("has no providers now" not in log, "not the no-providers wording: %s" % log[-600:])
    eq(d.healthz(), 200, "still up")
    check("sk-embedded-test-AAAA" not in log, "no secret in the log")
