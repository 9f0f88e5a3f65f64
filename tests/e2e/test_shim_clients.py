"""Real clients through libaor.so and aord (issue 4 item 3, trust of item 7).

Every test puts the mock provider behind aord with two keys for provider "openai"
(two_keys below): key A answers 429, so the client's answer must come from
key B (status 200 and `x-aor-key: B` where the client shows headers; the mock's log
shows A, then B).  Clients: curl -4/-6/--tcp-fastopen, Python asyncio, Node fetch,
https.request and happy eyeballs, a Bun-compiled binary, two C programs (epoll after
connect; non-blocking connect + poll + SO_ERROR, over plain HTTP), openssl s_client
(the leaf is checked with `openssl verify -x509_strict` against the aor CA), and an
SNI pass-through.  Python urllib and the npm openai / @anthropic-ai/sdk packages
(with streaming) are in test_clients.py.

Tests marked "netns" run in a private network namespace whose dnsmasq answers
provider names with TEST-NET addresses, A and AAAA (tests/e2e/netns.py; root only,
else skipped): aord resolves and publishes those addresses, clients with their own
resolver (Bun's c-ares) are recognised by address, and IPv6 is exercised.  The
others use the offline fallback (198.18.0.0/15) of the shim, as provider names do
not resolve on the test machine.
"""

import json
import os
import re
import shutil
import subprocess

import aortest
from test_walk import two_key_setup
import netns
from aortest import check, eq

CLIENTS = os.path.join(aortest.REPO, "tests", "clients")
NODE_MODULES = os.path.join(CLIENTS, "node_modules")
BUN = os.path.join(NODE_MODULES, ".bin", "bun")
KEY_A, KEY_B = "key-a-secret", "key-b-secret"
HOST = "api.openai.com"
T0 = 1800000000
CHAT = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})

# TEST-NET answers of the namespace's DNS.  api.groq.com (another intercepted
# name) shares the IPv4 address, as names behind one CDN do: the shim then sends
# "-" as the host and aord goes by the TLS SNI.
V4, V6 = "192.0.2.1", "2001:db8::1"
RECORDS = {HOST: [V4, V6], "api.groq.com": [V4]}

CURL_CHAT = ["https://%s/v1/chat/completions" % HOST, "-H", "Authorization: Bearer client-token",
             "-H", "Content-Type: application/json", "-d", CHAT]  # fmt: skip


# --- helpers -----------------------------------------------------------------


def two_keys(env, mock):
    """aord in front of mock with keys A then B (test_walk.two_key_setup), on a test clock,
    with AOR_DEBUG=1 for aord and every client."""
    return two_key_setup(env, fake_clock=T0, mock=mock, debug=True)[1]


def setup(env):
    """Mock + aord (two_keys); key A always answers 429."""
    mock = env.start_mock(tls=True)
    d = two_keys(env, mock)
    mock.script(KEY_A, [{"status": 429, "times": -1}])
    return mock, d


def keys_in_order(mock):
    return [r["key"] for r in mock.log() if r["path"].endswith("/chat/completions")]


def check_a_then_b(mock, n=1):
    """The first request went to A (429) then B; `n` requests in all, later ones
    straight to B (A is backed off)."""
    eq(keys_in_order(mock), [KEY_A] + [KEY_B] * n, "keys the mock saw, in order")


def daemon_saw(d, pattern, what):
    """The aord debug log has a line matching pattern; returns the match."""
    m = re.search(pattern, d.stderr_text(), re.M)
    check(m, "aord log has no %s (/%s/):\n%s" % (what, pattern, d.stderr_text()[-2000:]))
    return m


def shim_redirected(stderr, ip, port=443, host=HOST):
    """The client's AOR_DEBUG stderr says its connect to ip:port (host; "-" = known
    only as an address of several hosts) was redirected to aord."""
    pat = r"fd \d+ to %s port %d \(%s\): redirected" % (re.escape(ip), port, re.escape(host))
    check(re.search(pat, stderr), "no shim line /%s/ in:\n%s" % (pat, stderr[-1500:]))


def daemon_routed(d, ip, port=443, proto="tls", host=HOST):
    """The aord debug log shows a shim connection for host at ip:port."""
    daemon_saw(d, r"shim connection: host=%s ip=%s port=%d %s"
               % (re.escape(host), re.escape(ip), port, proto), "a connection to %s" % ip)


def published(env, ip, host=HOST):
    """Waits until aord's published file lists ip for host (its resolver thread)."""
    path = os.path.join(env.env["XDG_RUNTIME_DIR"], "aor", "hosts")

    def has():
        try:
            with open(path) as f:
                return ("a %s 443 %s" % (ip, host)) in f.read()
        except OSError:
            return False

    aortest.wait_until(has, 15, what="%s %s in %s" % (host, ip, path))


def need_node():
    if not shutil.which("node"):
        raise AssertionError("node not found: run scripts/install-deps")


def run_node(env, code, timeout=40):
    need_node()
    rc, out, err = env.run_client(["node", "-e", code], timeout=timeout,
                                  extra_env={"NODE_PATH": NODE_MODULES})  # fmt: skip
    eq(rc, 0, "node exit (stdout %r, stderr: %s)" % (out, err[-2500:]))
    return out.strip().splitlines(), err


NODE_BODY = "const body = %s;\n" % json.dumps(CHAT)
NODE_HEADERS = "{'content-type': 'application/json', authorization: 'Bearer client-token'}"


# --- curl ---------------------------------------------------------------------


def test_curl_ipv4_and_ipv6_netns(env):
    """netns: curl -4 connects to 192.0.2.1, curl -6 to 2001:db8::1; both redirected."""
    with netns.NetNS(env, RECORDS):
        mock, d = setup(env)
        r = env.curl(["-4"] + CURL_CHAT, timeout=30)
        eq(r.rc, 0, "curl -4 exit (%s)" % r.stderr[-1500:])
        eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "curl -4 status, key")
        check("choices" in r.json(), "curl -4 got the chat answer")
        shim_redirected(r.stderr, V4)
        daemon_routed(d, V4)
        r = env.curl(["-6"] + CURL_CHAT, timeout=30)
        eq(r.rc, 0, "curl -6 exit (%s)" % r.stderr[-1500:])
        eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "curl -6 status, key")
        shim_redirected(r.stderr, V6)
        daemon_routed(d, V6)
        check_a_then_b(mock, n=2)


test_curl_ipv4_and_ipv6_netns.timeout = 60


def test_curl_tcp_fastopen(env):
    mock, d = setup(env)
    r = env.curl(["--tcp-fastopen"] + CURL_CHAT, timeout=30)
    eq(r.rc, 0, "curl exit (%s)" % r.stderr[-1500:])
    eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "curl --tcp-fastopen status, key")
    check("choices" in r.json(), "chat answer")
    # curl on Linux asks for TFO with TCP_FASTOPEN_CONNECT and a plain connect(); the
    # sendto(MSG_FASTOPEN) path is connect_probe's "fastopen" mode (test_shim_basic).
    check(re.search(r"fd \d+ to \S+ port 443 \(%s\): redirected" % HOST, r.stderr),
          "shim redirected the TFO connection: " + r.stderr[-1500:])
    check_a_then_b(mock)


test_curl_tcp_fastopen.timeout = 60


# --- aord stopped ---------------------------------------------------------------

STOPPED_CLIENT = r"""
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
        print("status", r.status)
except Exception as e:
    print("error", getattr(getattr(e, "reason", e), "errno", None), type(e).__name__)
"""


def test_config_host_known_with_aord_stopped_netns(env):
    """QA: after a clean stop aord removed its published hosts file, so with aord down a
    provider host that only the config names (not built in) was unknown to the shim: its
    connections went direct without the fail-open warning, and AOR_STRICT=1 did not
    refuse them (spec §2). The file now keeps its host lines (no addresses) at stop."""
    with netns.NetNS(env, {"llm.qa.test": ["127.0.0.1"]}):
        mock = env.start_mock(tls=False)
        env.set_keys(KEY_A="key-a-secret")
        env.write_config(f"""
            [daemon]
            listen = off
            [key "A"]
            env = KEY_A
            [provider "llm"]
            dialect = openai
            base_url = http://llm.qa.test:{mock.plain_port}
            keys = A
            models = *
            """)
        d = env.start_daemon()
        hosts = os.path.join(os.path.dirname(env.socket_path), "hosts")

        def published():
            try:
                with open(hosts) as f:
                    return "\na 127.0.0.1 %d llm.qa.test" % mock.plain_port in f.read()
            except OSError:
                return False

        aortest.wait_until(published, 10, what="the address of llm.qa.test is published")
        eq(d.stop(), 0, "aord exit code on SIGTERM")
        with open(hosts) as f:
            text = f.read()
        check("h llm.qa.test %d\n" % mock.plain_port in text and "\na " not in text,
              "the stopped aord's file keeps the host, not its addresses: %r" % text)
        url = "http://llm.qa.test:%d/v1/models" % mock.plain_port
        rc, out, err = env.run_client(["python3", "-c", STOPPED_CLIENT, url],
                                      extra_env={"AOR_STRICT": "1"})
        eq(out.strip(), "error 111 URLError", "AOR_STRICT=1 with aord down refuses (stderr %r)"
           % err)
        rc, out, err = env.run_client(["python3", "-c", STOPPED_CLIENT, url])
        eq(out.strip(), "status 200", "fail-open: the request goes direct (stderr %r)" % err)
        eq(err.count("connecting directly (fail-open)"), 1, "one warning line: %r" % err)


test_config_host_known_with_aord_stopped_netns.timeout = 60


# --- Rust ---------------------------------------------------------------------

RUST_CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "rust",
                           "std_client.rs")


def rustc():
    """The rustc on PATH or rustup's, or Skip (Rust is not one of aor's dependencies)."""
    for p in (shutil.which("rustc"), os.path.expanduser("~/.cargo/bin/rustc")):
        if p and os.access(p, os.X_OK):
            return p
    raise aortest.Skip("no rustc on this machine")


def test_rust_std_client_netns(env):
    """Spec §2 "Rust clients linked against glibc": a std-only Rust program
    (tests/clients/rust/std_client.rs: getaddrinfo through std, std::net::TcpStream) to a
    provider whose base_url host only the config names, plain HTTP: routed by aord (x-aor-*
    headers), peer_addr() is the address it connected to, TCP_NODELAY works, and a
    streamed answer arrives chunk by chunk with its terminator."""
    exe = env.path("std_client")
    r = subprocess.run([rustc(), "--edition", "2021", "-o", exe, RUST_CLIENT],
                       capture_output=True, text=True, timeout=120, cwd=env.tmp)
    eq(r.returncode, 0, "rustc: %s" % r.stderr[-2000:])
    with netns.NetNS(env, {"llm.qa.test": ["127.0.0.1"]}):
        mock = env.start_mock(tls=False)
        env.set_keys(KEY_A="key-a-secret")
        env.write_config(f"""
            [daemon]
            listen = off
            [key "A"]
            env = KEY_A
            [provider "llm"]
            dialect = openai
            base_url = http://llm.qa.test:{mock.plain_port}
            keys = A
            models = *
            """)
        env.start_daemon()
        port = str(mock.plain_port)
        for mode in ("plain", "stream"):
            rc, out, err = env.run_client([exe, "llm.qa.test", port, "gpt-4o-mini", mode])
            eq(rc, 0, "%s: exit (stdout %r, stderr %r)" % (mode, out, err[-1500:]))
            lines = out.splitlines()
            check("peer 127.0.0.1:%s" % port in lines, "%s: peer_addr(): %r" % (mode, out))
            check("status HTTP/1.1 200 OK" in lines, "%s: status: %r" % (mode, out))
            check("header x-aor-provider: llm" in lines and "header x-aor-key: A" in lines,
                  "%s: routed by aord: %r" % (mode, out))
            if mode == "stream":
                check("end terminator" in lines and "done 1" in lines,
                      "the stream ends with its terminator: %r" % out)
                chunks = [ln for ln in lines if ln.startswith("chunks ")]
                check(chunks and int(chunks[0].split()[1]) >= 2, "chunk by chunk: %r" % out)
        check(all(x["key"] == "key-a-secret" for x in mock.log()) and len(mock.log()) == 2,
              "the mock got both requests with the configured key")


test_rust_std_client_netns.timeout = 180


# --- Python asyncio -------------------------------------------------------------

ASYNCIO_CLIENT = r"""
import asyncio, json, ssl
BODY = %r

async def main():
    r, w = await asyncio.wait_for(
        asyncio.open_connection("api.openai.com", 443, ssl=ssl.create_default_context()), 20)
    w.write(("POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\n"
             "Content-Type: application/json\r\nAuthorization: Bearer client-token\r\n"
             "Content-Length: %%d\r\n\r\n" %% len(BODY)).encode() + BODY.encode())
    await w.drain()
    head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 20)
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split()[1]
    hdrs = {k.strip().lower(): v.strip() for k, v in
            (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
    body = await asyncio.wait_for(r.readexactly(int(hdrs["content-length"])), 20)
    w.close()
    print(status, hdrs.get("x-aor-key"), json.loads(body)["object"])

asyncio.run(main())
""" % CHAT


def test_python_asyncio_open_connection(env):
    mock, d = setup(env)
    rc, out, err = env.run_client(["python3", "-c", ASYNCIO_CLIENT], timeout=40)
    eq(rc, 0, "python exit (stderr: %s)" % err[-2500:])
    eq(out.split(), ["200", "B", "chat.completion"], "asyncio status, x-aor-key, object")
    check_a_then_b(mock)


test_python_asyncio_open_connection.timeout = 60


# --- Node ----------------------------------------------------------------------


def test_node_fetch(env):
    mock, d = setup(env)
    code = NODE_BODY + r"""
fetch('https://api.openai.com/v1/chat/completions', { method: 'POST', body,
  headers: %s, signal: AbortSignal.timeout(20000) })
  .then(async (r) => { const j = await r.json();
    console.log(r.status, r.headers.get('x-aor-key'), j.object); })
  .catch((e) => { console.error('ERR', e, e.cause); process.exit(1); });
""" % NODE_HEADERS
    lines, _ = run_node(env, code)
    eq(lines[-1:] and lines[-1].split(), ["200", "B", "chat.completion"], "Node fetch answer")
    check_a_then_b(mock)


test_node_fetch.timeout = 60


NODE_HTTPS = NODE_BODY + r"""
const https = require('https');
function post(opts) {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: 'api.openai.com', port: 443, method: 'POST',
      path: '/v1/chat/completions', headers: %s, ...opts }, (res) => {
      const sock = res.socket;
      const peer = [sock.remoteFamily, sock.remoteAddress,
                    (sock.autoSelectFamilyAttemptedAddresses || []).join(',') || '-'];
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (data += d));
      res.on('end', () => resolve([res.statusCode, res.headers['x-aor-key'],
                                   JSON.parse(data).object, ...peer]));
    });
    req.setTimeout(20000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}
""" % NODE_HEADERS


def test_node_https_request(env):
    mock, d = setup(env)
    code = NODE_HTTPS + r"""
post({}).then((r) => { console.log(r.slice(0, 3).join(' ')); process.exit(0); })
  .catch((e) => { console.error('ERR', e); process.exit(1); });
"""
    lines, _ = run_node(env, code)
    eq(lines[-1:] and lines[-1].split(), ["200", "B", "chat.completion"], "https.request answer")
    check_a_then_b(mock)


test_node_https_request.timeout = 60


def test_node_happy_eyeballs_netns(env):
    """netns: the name has AAAA and A answers; Node connects with autoSelectFamily
    (happy eyeballs) and its answer comes through aord."""
    with netns.NetNS(env, RECORDS):
        mock, d = setup(env)
        code = NODE_HTTPS + r"""
const dns = require('dns');
dns.promises.lookup('api.openai.com', { all: true }).then(async (addrs) => {
  console.log('lookup', addrs.map((a) => a.address).sort().join(' '));
  const r = await post({ autoSelectFamily: true, autoSelectFamilyAttemptTimeout: 250,
                         agent: false });
  console.log(r.join(' '));
  process.exit(0);
}).catch((e) => { console.error('ERR', e); process.exit(1); });
"""
        lines, err = run_node(env, code)
        eq(lines[0], "lookup %s %s" % (V4, V6), "Node's lookup sees both families")
        res = lines[-1].split()
        eq(res[:3], ["200", "B", "chat.completion"], "happy-eyeballs answer")
        check(res[3] in ("IPv4", "IPv6") and res[4] in (V4, V6),
              "peer as Node sees it (getpeername): %r" % res[3:])
        # Happy eyeballs tried the peer address; the shim redirected that connect.
        check(res[4] in res[5], "autoSelectFamilyAttemptedAddresses %r names the peer" % res[5])
        shim_redirected(err, res[4])
        daemon_routed(d, res[4])
        check_a_then_b(mock)


test_node_happy_eyeballs_netns.timeout = 60


# --- Bun (single-file compiled binary) -------------------------------------------

BUN_CLIENT = r"""
// aor e2e Bun client.  `client fetch`: fetch() by name (Bun's getaddrinfo).
// `client raw`: the address from node:dns resolve4 (c-ares, not libc), then a TLS
// connection to that address with SNI api.openai.com and a hand-written request.
import dns from "node:dns";
import tls from "node:tls";
const host = "api.openai.com";
const body = %s;
const headers = { "content-type": "application/json", authorization: "Bearer client-token" };
const mode = process.argv[2] ?? "fetch";
if (mode === "fetch") {
  const r = await fetch(`https://${host}/v1/chat/completions`,
                        { method: "POST", headers, body, signal: AbortSignal.timeout(20000) });
  const j: any = await r.json();
  console.log(r.status, r.headers.get("x-aor-key"), j.object);
} else {
  const ip = (await dns.promises.resolve4(host))[0];
  const answer: string = await new Promise((resolve, reject) => {
    const s = tls.connect({ host: ip, port: 443, servername: host }, () => {
      s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\n` +
        `Content-Type: application/json\r\nAuthorization: Bearer client-token\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    });
    let data = "";
    s.setEncoding("utf8");
    s.on("data", (d) => (data += d));
    s.on("end", () => resolve(data));
    s.on("error", reject);
    setTimeout(() => reject(new Error("timeout")), 20000).unref();
  });
  const status = answer.split("\r\n")[0].split(" ")[1];
  const key = /^x-aor-key:\s*(\S+)/im.exec(answer)?.[1];
  console.log(ip, status, key);
}
process.exit(0);
""" % json.dumps(CHAT)


def build_bun_client(env):
    """`bun build --compile` of BUN_CLIENT into the test's temp dir; returns the binary."""
    if not os.path.exists(BUN):
        raise AssertionError("%s missing: run scripts/install-deps (npm ci in tests/clients)" % BUN)
    try:
        p = subprocess.run([BUN, "--version"], env=env.env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30)  # fmt: skip
    except OSError as e:
        raise aortest.Skip("the bun binary cannot run here: %s" % e)
    if p.returncode != 0:
        why = p.stderr.decode(errors="replace").strip()[:200]
        raise aortest.Skip("the bun binary cannot run here (exit %d: %s)" % (p.returncode, why))
    src, exe = env.path("bun_client.ts"), env.path("bun_client")
    with open(src, "w") as f:
        f.write(BUN_CLIENT)
    rc, out, err = env.run_client([BUN, "build", "--compile", src, "--outfile", exe],
                                  preload=False, timeout=90, cwd=env.tmp)  # fmt: skip
    eq(rc, 0, "bun build --compile exit (%s)" % (out + err)[-2000:])
    check(os.access(exe, os.X_OK), "bun build produced %s" % exe)
    return exe


def test_bun_compiled_binary_netns(env):
    """netns: a `bun build --compile` binary (own DNS: c-ares) is routed by the
    address aord published and the TLS SNI."""
    exe = build_bun_client(env)
    with netns.NetNS(env, RECORDS):
        mock, d = setup(env)
        published(env, V4)
        published(env, V4, "api.groq.com")
        # 1. fetch() by name.
        rc, out, err = env.run_client([exe, "fetch"], timeout=40)
        eq(rc, 0, "bun fetch exit (stdout %r, stderr: %s)" % (out, err[-2500:]))
        eq(out.split(), ["200", "B", "chat.completion"], "Bun fetch: status, x-aor-key, object")
        daemon_saw(d, r"shim connection: host=%s ip=(%s|%s) port=443 tls"
                   % (HOST, re.escape(V4), re.escape(V6)), "Bun's fetch connection")
        # 2. Own resolver + connect by address: only the published set knows the
        # address, and it belongs to two hosts, so the preamble says "-" and aord
        # goes by SNI.
        rc, out, err = env.run_client([exe, "raw"], timeout=40)
        eq(rc, 0, "bun raw exit (stdout %r, stderr: %s)" % (out, err[-2500:]))
        eq(out.split(), [V4, "200", "B"], "Bun by address: address, status, x-aor-key")
        check("resolve %s" % HOST not in err,
              "resolve4 (c-ares) bypasses the hooked getaddrinfo: " + err[-1500:])
        shim_redirected(err, V4, host="-")
        daemon_routed(d, V4)
        check_a_then_b(mock, n=2)


test_bun_compiled_binary_netns.timeout = 120


# --- C programs over plain HTTP (tests/progs) -------------------------------------


def run_http_prog(env, name):
    mock, d = setup(env)
    prog = os.path.join(env.build, "tests", "progs", name)
    check(os.access(prog, os.X_OK), "%s not built (make BUILD=... testbins)" % prog)
    rc, out, err = env.run_client([prog, HOST, "80"], timeout=40,
                                  extra_env={"AOR_HOSTS": HOST + ":80"})  # fmt: skip
    eq(rc, 0, "%s exit (stdout %r, stderr: %s)" % (name, out, err[-2000:]))
    lines = out.splitlines()
    eq(lines[0], "connect immediate", "connect() of the redirected socket")
    eq(lines[1:3], ["status 200", "x-aor-key B"], "answer")
    eq(lines[-1], "ok", "end")
    check(re.search(r"fd \d+ to \S+ port 80 \(%s\): redirected" % HOST, err),
          "shim redirected port 80: " + err[-1500:])
    daemon_saw(d, r"shim connection: host=%s ip=\S+ port=80 plain" % HOST, "the plain connection")
    check_a_then_b(mock)


def test_c_epoll_registered_after_connect(env):
    run_http_prog(env, "http_epoll_after")


test_c_epoll_registered_after_connect.timeout = 60


def test_c_nonblocking_connect_poll_so_error(env):
    run_http_prog(env, "http_nonblock_poll")


test_c_nonblocking_connect_poll_so_error.timeout = 60


# --- SNI pass-through -------------------------------------------------------------


def test_sni_passthrough_untouched_netns(env):
    """netns: a recognised connection whose SNI is not a provider host reaches the
    original address untouched: the mock answers with its own certificate, no x-aor-*.

    The name is mock.test (A 127.0.0.1 only, in the namespace's DNS; the mock's
    certificate names it): curl resolves "localhost" itself, without getaddrinfo, so
    the shim would never see that name, and a pass-through to ::1 would be refused
    (the mock listens on 127.0.0.1)."""
    with netns.NetNS(env, dict(RECORDS, **{"mock.test": ["127.0.0.1"]})):
        mock = env.start_mock(tls=True, names=("mock.test",))
        d = two_keys(env, mock)
        url = "https://mock.test:%d/v1/models" % mock.tls_port
        r = env.curl(["--cacert", mock.ca_path, url], timeout=30,
                     extra_env={"AOR_HOSTS": "mock.test:%d" % mock.tls_port})  # fmt: skip
        eq(r.rc, 0, "curl exit (verified with the mock's CA only: %s)" % r.stderr[-1500:])
        eq(r.status, 200, "status")
        eq(sorted(h for h in r.headers if h.startswith("x-aor-")), [], "x-aor-* headers")
        eq(r.json().get("object"), "list", "the mock's model list")
        shim_redirected(r.stderr, "127.0.0.1", mock.tls_port, "mock.test")
        daemon_saw(d, r"SNI mock\.test is not a provider host; passing through to 127\.0\.0\.1:%d"
                   % mock.tls_port, "the pass-through")  # fmt: skip
        eq([(x["method"], x["path"], x["key"]) for x in mock.log()],
           [("GET", "/v1/models", None)], "what the mock received")  # fmt: skip


test_sni_passthrough_untouched_netns.timeout = 60


# --- trust: the leaf aord serves verifies strictly against the aor CA ---------------


def test_leaf_verifies_x509_strict(env):
    mock, d = setup(env)
    # s_client is a client too: it sends a request on stdin and prints the answer.
    req = ("POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer client-token"
           "\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n"
           "\r\n%s" % (HOST, len(CHAT), CHAT))  # fmt: skip
    rc, out, err = env.run_client(
        ["openssl", "s_client", "-connect", HOST + ":443", "-servername", HOST, "-showcerts",
         "-ign_eof"], input=req, timeout=30)  # fmt: skip
    answer_ok = re.search(r"^HTTP/1\.1 200 ", out, re.M) and re.search(
        r"^x-aor-key: B\r?$", out, re.M | re.I)
    check(answer_ok, "s_client's answer is 200 from key B: " + out[-1500:])
    check_a_then_b(mock)
    m = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", out, re.S)
    check(m, "s_client through the shim printed no certificate (rc %d): %s" % (rc, err[-1500:]))
    leaf = env.path("leaf.pem")
    with open(leaf, "w") as f:
        f.write(m.group(0) + "\n")
    cmd = ["openssl", "verify", "-x509_strict", "-purpose", "sslserver", "-verify_hostname", HOST,
           "-CAfile", env.ca_path, leaf]  # fmt: skip
    rc, out, err = env.run_client(cmd, preload=False, timeout=30)
    eq((rc, out.strip()), (0, leaf + ": OK"), "openssl verify -x509_strict (%s)" % err.strip())
    daemon_saw(d, r"shim connection: host=%s ip=\S+ port=443 tls" % HOST, "s_client's connection")


test_leaf_verifies_x509_strict.timeout = 60
