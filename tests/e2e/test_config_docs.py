"""docs/config.md's examples are real (QA): each complete example passes `aord
--check-config`; the Tests example's ca_file is where the mock writes its CA (it named
tests/mockprov/ca.pem, which does not exist); and the fallback example falls back the way
its comment says — across providers of the request's dialect only (docs/route.md; it
suggested Anthropic as a fallback for OpenAI models)."""
import json
import os
import re
import subprocess

import aortest
from aortest import check, eq

DOC = os.path.join(aortest.REPO, "docs", "config.md")
SECRETS = {"OPENAI_API_KEY": "sk-doc-main", "OPENAI_API_KEY_BACKUP": "sk-doc-backup",
           "OPENROUTER_API_KEY": "sk-doc-router", "ANTHROPIC_API_KEY": "sk-doc-anthropic",
           "MOCK_KEY_1": "sk-doc-mock"}


def examples():
    """{'fallback': (prose, ini), 'tests': ..., 'tuning': ...}: the ```ini blocks of
    ## Examples, each with the prose before it."""
    with open(DOC) as f:
        text = f.read()
    part = text[text.index("## Examples"):]
    out, last = {}, 0
    for m in re.finditer(r"```ini\n(.*?)```", part, re.S):
        prose, ini, last = part[last:m.start()], m.group(1), m.end()
        if "fallback" in prose:
            out["fallback"] = (prose, ini)
        elif prose.lstrip().startswith("Tests") or "--tls-dir" in prose:
            out["tests"] = (prose, ini)
        else:
            out["tuning"] = (prose, ini)
    eq(sorted(out), ["fallback", "tests", "tuning"], "the three examples of docs/config.md")
    return out


def check_config(env, text, name):
    path = env.path(name)
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([os.path.join(env.build, "aord"), "--check-config", "--config", path],
                       env=env.env, capture_output=True, text=True)
    eq(r.returncode, 0, "%s passes aord --check-config:\n%s%s" % (name, r.stderr, text))


def with_env_file(env):
    """The fallback example's env_file (secrets.env next to the config, 0600): next to
    the files check_config writes, and to the config file of write_config."""
    for d in (os.path.dirname(env.path("x.ini")), os.path.dirname(env.config_path)):
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "secrets.env")
        with open(path, "w") as f:
            f.write("# nothing: the variables are in the environment\n")
        os.chmod(path, 0o600)


def test_examples_pass_check_config(env):
    ex = examples()
    env.set_keys(**SECRETS)
    with_env_file(env)
    check_config(env, ex["fallback"][1], "fallback.ini")
    check_config(env, ex["tuning"][1], "tuning.ini")
    # The Tests example: started as documented, the mock writes DIR/ca.pem; ca_file names it.
    prose, ini = ex["tests"]
    m = re.search(r"--tls-dir (\S+?)`", prose)
    check(m, "the Tests example says how the mock is started (--tls-dir): %r" % prose)
    tls_dir = m.group(1)
    ca = re.search(r"^ca_file = (\S+)", ini, re.M).group(1)
    eq(ca, tls_dir + "/ca.pem", "ca_file is the CA the mock writes into its --tls-dir")
    mock = env.start_mock(tls=True)
    eq(os.path.basename(mock.ca_path), "ca.pem", "the mock's CA file name")
    check_config(env, ini.replace(tls_dir, os.path.dirname(mock.ca_path)), "tests.ini")


def test_fallback_example_stays_within_the_dialect(env):
    prose, ini = examples()["fallback"]
    check("never goes to anthropic" in prose, "the prose says what really happens: %r" % prose)
    mock = env.start_mock(tls=True)
    port = aortest.free_port()
    # Every provider of the example in front of the mock (one host serves all dialects).
    text = ini.replace("[daemon]\n", "[daemon]\nlisten = 127.0.0.1:%d\n" % port, 1)
    text = re.sub(r'^(\[provider "[^"]+"\][^\n]*)$',
                  r"\1\nbase_url = %s\nca_file = %s" % (mock.url, mock.ca_path), text,
                  flags=re.M)
    env.set_keys(**SECRETS)
    with_env_file(env)
    env.write_config(text)
    for k in ("OPENAI_API_KEY", "OPENAI_API_KEY_BACKUP", "ANTHROPIC_API_KEY"):
        mock.script(SECRETS[k], [{"status": 429, "times": -1}])
    d = env.start_daemon()

    chat = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
    st, _, body = aortest.http("POST", d.url + "/v1/chat/completions", chat,
                               {"content-type": "application/json"})
    eq(st, 200, "gpt-4o falls back to openrouter (%r)" % body[:300])
    tried = [(r["key"], r["model"]) for r in mock.requests(path="/chat/completions")]
    eq(tried, [(SECRETS["OPENAI_API_KEY"], "gpt-4o"), (SECRETS["OPENAI_API_KEY_BACKUP"], "gpt-4o"),
               (SECRETS["OPENROUTER_API_KEY"], "openai/gpt-4o")],
       "openai's keys, then openrouter with its model id")

    mock.reset()
    mock.script(SECRETS["ANTHROPIC_API_KEY"], [{"status": 429, "times": -1}])
    msg = json.dumps({"model": "claude-3-5-haiku-latest", "max_tokens": 16,
                      "messages": [{"role": "user", "content": "hi"}]})
    st, _, body = aortest.http("POST", d.url + "/v1/messages", msg,
                               {"content-type": "application/json",
                                "anthropic-version": "2023-06-01"})
    eq(st, 429, "an Anthropic request has no fallback (%r)" % body[:300])
    eq([r["key"] for r in mock.log()], [SECRETS["ANTHROPIC_API_KEY"]],
       "only anthropic was tried: never openai or openrouter")
