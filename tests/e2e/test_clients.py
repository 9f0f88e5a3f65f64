"""Issue 2 end-to-end: real clients through the shim — Python's urllib and Node's
`openai` and `@anthropic-ai/sdk` packages (pinned in tests/clients)."""
import json
import os

import aortest
from aortest import check, eq
from test_walk import two_key_setup

CLIENTS = os.path.join(aortest.REPO, "tests", "clients")


def need_node_modules():
    if not os.path.isdir(os.path.join(CLIENTS, "node_modules", "openai")):
        raise AssertionError("tests/clients/node_modules missing: run scripts/install-deps")


def test_python_urllib_through_shim(env):
    mock, d = two_key_setup(env)
    mock.script("key-a-secret", [{"status": 429, "times": -1}])
    code = r"""
import json, urllib.request
body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}).encode()
rq = urllib.request.Request("https://api.openai.com/v1/chat/completions", data=body,
    headers={"Content-Type": "application/json", "Authorization": "Bearer client"})
with urllib.request.urlopen(rq, timeout=30) as r:
    print(r.status, r.headers["x-aor-key"], r.headers["x-aor-attempts"], json.load(r)["model"])
"""
    rc, out, err = env.run_client(["python3", "-c", code])
    eq(rc, 0, "python exit (stderr: %s)" % err[-2000:])
    eq(out.split(), ["200", "B", "2", "gpt-4o-mini"], "python urllib result")


def test_node_openai_sdk_through_shim(env):
    need_node_modules()
    mock, d = two_key_setup(env)
    mock.script("key-a-secret", [{"status": 429, "times": -1}])
    code = r"""
const OpenAI = require('openai');
const client = new OpenAI({ apiKey: 'client-token', maxRetries: 0 });
(async () => {
  const { data, response } = await client.chat.completions
    .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    .withResponse();
  console.log(response.status, response.headers.get('x-aor-key'), data.object);
  const stream = await client.chat.completions.create({
    model: 'gpt-4o-mini', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  let n = 0, text = '';
  for await (const chunk of stream) { n++; text += chunk.choices[0]?.delta?.content || ''; }
  console.log('chunks', n, text.length > 0);
})().catch((e) => { console.error('ERR', e); process.exit(1); });
"""
    rc, out, err = env.run_client(["node", "-e", code], extra_env={"NODE_PATH": os.path.join(CLIENTS, "node_modules")},
                                  )
    eq(rc, 0, "node exit (stderr: %s)" % err[-3000:])
    lines = out.strip().splitlines()
    eq(lines[0].split(), ["200", "B", "chat.completion"], "openai SDK answer")
    check(lines[1].startswith("chunks ") and int(lines[1].split()[1]) >= 2 and lines[1].endswith("true"),
          "openai SDK stream: %r" % lines[1])


def start_anthropic(env, two_keys):
    """A TLS mock behind an Anthropic provider reached through the shim (api.anthropic.com):
    key a (ant-a-secret), and with two_keys a worse key b (ant-b-secret). Returns the mock."""
    need_node_modules()
    mock = env.start_mock(tls=True)
    port = aortest.free_port()
    env.set_keys(ANT_A="ant-a-secret", ANT_B="ant-b-secret")
    key_b = '[key "b"]\n        env = ANT_B\n        priority = 1' if two_keys else ""
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "a"]
        env = ANT_A
        {key_b}
        [provider "anthropic"]
        dialect = anthropic
        base_url = {mock.url}
        intercept = api.anthropic.com
        ca_file = {mock.ca_path}
        keys = {"a, b" if two_keys else "a"}
        models = claude-sonnet-4-5
        """)
    env.start_daemon()
    return mock


def test_node_anthropic_sdk_stream_through_shim(env):
    mock = start_anthropic(env, two_keys=True)
    # Key a: a 200 stream whose first event is an overloaded error -> failed attempt.
    mock.script("ant-a-secret", [{"kind": "sse_error_first", "times": -1}])
    code = r"""
const Anthropic = require('@anthropic-ai/sdk');
const client = new Anthropic({ apiKey: 'client-token', maxRetries: 0 });
(async () => {
  const stream = client.messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 20,
    messages: [{ role: 'user', content: 'hi' }] });
  let events = 0;
  stream.on('streamEvent', () => events++);
  const msg = await stream.finalMessage();
  console.log(msg.type, msg.role, events > 2);
})().catch((e) => { console.error('ERR', e); process.exit(1); });
"""
    rc, out, err = env.run_client(["node", "-e", code], extra_env={"NODE_PATH": os.path.join(CLIENTS, "node_modules")})
    eq(rc, 0, "node exit (stderr: %s)" % err[-3000:])
    eq(out.split(), ["message", "assistant", "true"], "anthropic SDK stream")
    eq(len(mock.requests(key="ant-a-secret")), 1, "key a tried once")
    eq(len(mock.requests(key="ant-b-secret")), 1, "answered by key b")


def test_node_anthropic_sdk_sees_a_mid_stream_overloaded_error(env):
    """Anthropic ends a started stream with event: error / overloaded_error. aor leaves
    the client's response without its terminator (§5.3), after the event: the SDK still
    raises the provider's error (an overloaded_error it can retry), not a bare
    connection error."""
    mock = start_anthropic(env, two_keys=False)
    # message_start, content_block_start, ping, a delta: the error comes after content
    mock.script("ant-a-secret", [{"kind": "sse_error_after", "events": 4, "times": -1}])
    code = r"""
const Anthropic = require('@anthropic-ai/sdk');
const client = new Anthropic({ apiKey: 'client-token', maxRetries: 0 });
(async () => {
  const stream = client.messages.stream({ model: 'claude-sonnet-4-5', max_tokens: 20,
    messages: [{ role: 'user', content: 'hi' }] });
  let events = 0;
  stream.on('streamEvent', () => events++);
  try {
    await stream.finalMessage();
    console.log('NO-ERROR');
  } catch (e) {
    const type = e && e.error && e.error.error ? e.error.error.type : '-';
    console.log(e.constructor.name, type, events >= 1);
  }
})().catch((e) => { console.error('ERR', e); process.exit(1); });
"""
    rc, out, err = env.run_client(["node", "-e", code], extra_env={"NODE_PATH": os.path.join(CLIENTS, "node_modules")})
    eq(rc, 0, "node exit (stderr: %s)" % err[-3000:])
    words = out.split()
    check(len(words) == 3 and words[1] == "overloaded_error" and words[2] == "true",
          "the SDK raised the provider's overloaded_error after the first events: %r" % out)
