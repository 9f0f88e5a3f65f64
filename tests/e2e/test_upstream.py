"""aord's two upstream paths end to end (daemon/upstream.c): the direct HTTP/1.1
keep-alive client, and libcurl when a proxy variable applies to the upstream's scheme
(http_proxy, lower case only, for http://; https_proxy/HTTPS_PROXY for https://;
all_proxy/ALL_PROXY for both) or AOR_UPSTREAM=curl.  A sidecar request to a provider on
the mock's plain http:// URL, with a small forward proxy written here (stdlib, loopback)
that counts what it carries."""
import http.client
import json
import os
import socket
import subprocess
import threading
import urllib.parse

import aortest
import test_walk
from aortest import check, eq

T0 = 1800000000
MODEL = "gpt-4o-mini"
HEAD_MAX = 64 << 10  # bytes of a request head the proxy accepts


class ForwardProxy:
    """A forward HTTP proxy on 127.0.0.1: takes absolute-form requests
    ("POST http://host:port/path HTTP/1.1"), sends each to its origin in origin form
    with "Connection: close", and relays the answer byte for byte (streams included)
    until the origin closes.  One request per client connection.  .requests() lists
    what it carried: {"method", "url", "headers" (lower-case names)}; .refused the
    requests it could not carry (CONNECT, origin-form, unreachable origin)."""

    def __init__(self):
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.lock = threading.Lock()
        self._carried, self.refused, self.conns = [], [], 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def requests(self):
        with self.lock:
            return list(self._carried)

    def close(self):
        self.closed = True
        try:
            self.lsock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.lsock.close()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                self.conns += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _refuse(self, c, why):
        with self.lock:
            self.refused.append(why)
        body = (why + "\n").encode()
        c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n"
                  b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    def _serve(self, c):
        up = None
        try:
            c.settimeout(20)
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = c.recv(65536)
                if not chunk:
                    return
                buf += chunk
                if len(buf) > HEAD_MAX:
                    return self._refuse(c, "request head over %d bytes" % HEAD_MAX)
            head, rest = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3:
                return self._refuse(c, "bad request line %r" % lines[0])
            method, target, _ = parts
            if method == "CONNECT":
                return self._tunnel(c, target, lines, rest)
            u = urllib.parse.urlsplit(target)
            if u.scheme != "http" or not u.hostname:
                return self._refuse(c, "not an absolute http:// target: %s %s" % (method, target))
            headers, kept = {}, []
            for ln in lines[1:]:
                k, _, v = ln.partition(":")
                lk = k.strip().lower()
                headers[lk] = v.strip()
                if lk not in ("connection", "proxy-connection", "keep-alive"):
                    kept.append(ln)
            try:
                up = socket.create_connection((u.hostname, u.port or 80), timeout=20)
            except OSError as e:
                return self._refuse(c, "origin %s: %s" % (u.netloc, e))
            with self.lock:
                self._carried.append({"method": method, "url": target, "headers": headers})
            path = (u.path or "/") + ("?" + u.query if u.query else "")
            out = ["%s %s HTTP/1.1" % (method, path)] + kept + ["Connection: close", "", ""]
            up.sendall("\r\n".join(out).encode("latin-1") + rest)
            threading.Thread(target=_pump, args=(c, up), daemon=True).start()
            _pump(up, c)  # the answer, until the origin closes
        except OSError:
            pass
        finally:
            for s in (c, up):
                if s is not None:
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    s.close()


    def _tunnel(self, c, target, lines, rest):
        """CONNECT host:port: a TCP tunnel after "200 Connection established", with a
        header line of the proxy's own that must not reach aord's client."""
        host, _, port = target.rpartition(":")
        try:
            up = socket.create_connection((host, int(port)), timeout=20)
        except (OSError, ValueError) as e:
            return self._refuse(c, "CONNECT %s: %s" % (target, e))
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        with self.lock:
            self._carried.append({"method": "CONNECT", "url": target, "headers": headers})
        try:
            c.sendall(b"HTTP/1.1 200 Connection established\r\n"
                      b"Proxy-Agent: aortest-proxy\r\n\r\n")
            if rest:
                up.sendall(rest)
            threading.Thread(target=_pump, args=(c, up), daemon=True).start()
            _pump(up, c)
        finally:
            try:
                up.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            up.close()


def _pump(src, dst):
    """Copies src to dst until src ends or either fails."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                return
            dst.sendall(data)
    except OSError:
        return


def start_proxy(env):
    p = ForwardProxy()
    orig = env.cleanup

    def cleanup():
        p.close()
        orig()

    env.cleanup = cleanup
    return p


def setup(env, daemon_env=None):
    """Mock (plain HTTP only) + aord with provider "openai" (keys A then B, secrets
    key-a-secret / key-b-secret) at the mock's http:// URL.  aord's environment: this
    process's scrubbed one without AOR_UPSTREAM, plus daemon_env.  Returns (mock, d)."""
    mock = env.start_mock(tls=False)
    env.env.pop("AOR_UPSTREAM", None)  # each test picks its path itself
    return test_walk.two_key_setup(env, fake_clock=T0, mock=mock, daemon_env=daemon_env)


def chat(d, stream=False):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream"] = True
    return d.http("POST", "/v1/chat/completions", body, {"authorization": "Bearer client"})


def check_answer(mock, status, headers, body, key, attempts):
    """The sidecar's answer is the mock's answer to `key` with the walk's x-aor-* headers."""
    eq(status, 200, "status (body %r)" % body[:300])
    eq(headers.get("x-aor-key"), key, "x-aor-key")
    eq(headers.get("x-aor-attempts"), str(attempts), "x-aor-attempts")
    eq(headers.get("x-aor-provider"), "openai", "x-aor-provider")
    j = json.loads(body)
    eq(j.get("object"), "chat.completion", "answer object")
    eq(j.get("model"), MODEL, "answer model")
    secret = "key-%s-secret" % key.lower()
    last = mock.requests(key=secret)[-1]
    eq(headers.get("x-mock-seq"), str(last["seq"]), "x-mock-seq = the mock's request for " + key)
    eq(headers.get("x-request-id"), "req_mock%d" % last["seq"], "x-request-id from the mock")


def test_http_proxy_carries_request_and_failover(env):
    proxy = start_proxy(env)
    mock, d = setup(env, {"http_proxy": proxy.url})
    target = mock.plain_url + "/v1/chat/completions"

    status, headers, body = chat(d)
    check_answer(mock, status, headers, body, "A", 1)
    got = proxy.requests()
    eq([(r["method"], r["url"]) for r in got], [("POST", target)], "what the proxy carried")
    eq(got[0]["headers"].get("authorization"), "Bearer key-a-secret", "key A's secret upstream")

    # The walk on the libcurl path: A answers 429, B answers; both through the proxy.
    mock.script("key-a-secret", [{"status": 429, "times": -1}])
    status, headers, body = chat(d)
    check_answer(mock, status, headers, body, "B", 2)
    got = proxy.requests()[1:]
    eq([(r["method"], r["url"]) for r in got], [("POST", target)] * 2, "failover via the proxy")
    eq([r["headers"].get("authorization") for r in got],
       ["Bearer key-a-secret", "Bearer key-b-secret"], "A then B through the proxy")
    eq(proxy.refused, [], "requests the proxy refused")
    eq(len(mock.log()), 3, "upstream requests at the mock (none around the proxy)")
    rows = [b for b in d.state()["backoff"] if b["key"] == "A"]
    eq([(r["last_error_kind"], r["window_s"]) for r in rows], [("rate", 5)], "A backed off")


def test_https_proxy_connect_tunnel_walks(env):
    # HTTPS_PROXY: libcurl opens a CONNECT tunnel; the proxy's "200 Connection
    # established" is not the upstream's answer. A 429 on a new tunnel must be walked
    # like any other (it was sent to the client as a 200 without the upstream's headers).
    proxy = start_proxy(env)
    mock = env.start_mock(tls=True)
    env.env.pop("AOR_UPSTREAM", None)
    mock, d = test_walk.two_key_setup(env, fake_clock=T0, mock=mock,
                                      daemon_env={"HTTPS_PROXY": proxy.url})
    mock.script("key-a-secret", [{"status": 429, "times": -1}])
    status, headers, body = chat(d)
    check_answer(mock, status, headers, body, "B", 2)
    check(headers.get("content-type", "").startswith("application/json"),
          "the upstream's Content-Type: %r" % headers.get("content-type"))
    check("proxy-agent" not in headers, "the proxy's own header reached the client")
    rows = [b for b in d.state()["backoff"] if b["key"] == "A"]
    eq([(r["last_error_kind"], r["window_s"]) for r in rows], [("rate", 5)], "A backed off")
    status, headers, body = chat(d)
    check_answer(mock, status, headers, body, "B", 1)  # A is backed off: not tried
    got = proxy.requests()
    check(got and all(r["method"] == "CONNECT" and r["url"] == "127.0.0.1:%d" % mock.tls_port
                      for r in got), "the proxy carried CONNECT tunnels only: %r" % got)
    eq(proxy.refused, [], "requests the proxy refused")


def test_direct_without_proxy_reuses_one_connection(env):
    proxy = start_proxy(env)  # nothing points at it: it must see nothing
    mock, d = setup(env)
    for i in range(2):
        status, headers, body = chat(d)
        check_answer(mock, status, headers, body, "A", 1)
    log = mock.log()
    eq(len(log), 2, "upstream requests")
    eq(log[1]["conn"], log[0]["conn"], "the second request's upstream connection (mock conn id)")
    eq(proxy.conns, 0, "connections to the proxy")
    check("libcurl" not in d.stderr_text(), "aord did not announce the libcurl path")


def test_proxy_variables_for_other_schemes_leave_http_direct(env):
    # https_proxy applies to https:// only; HTTP_PROXY (upper case) is not read for
    # http:// (libcurl's rule, httpoxy): the http:// upstream is reached without the
    # proxy, on one kept-alive connection.
    proxy = start_proxy(env)
    mock, d = setup(env, {"https_proxy": proxy.url, "HTTP_PROXY": proxy.url})
    for i in range(2):
        status, headers, body = chat(d)
        check_answer(mock, status, headers, body, "A", 1)
    log = mock.log()
    eq(log[1]["conn"], log[0]["conn"], "the second request's upstream connection (mock conn id)")
    eq(proxy.conns, 0, "connections to the proxy")


def test_aor_upstream_curl_failover(env):
    mock, d = setup(env, {"AOR_UPSTREAM": "curl"})
    check("AOR_UPSTREAM=curl" in d.stderr_text(), "aord says every transfer goes through libcurl")
    mock.script("key-a-secret", [{"status": 429, "times": -1}])
    status, headers, body = chat(d)
    check_answer(mock, status, headers, body, "B", 2)
    eq([r["key"] for r in mock.log()], ["key-a-secret", "key-b-secret"], "A then B at the mock")
    status, headers, body = chat(d)
    check_answer(mock, status, headers, body, "B", 1)  # A is backed off: not tried


def stream_and_check(mock, d):
    """A gated SSE stream through the sidecar: the first events arrive while the mock
    holds the rest, then the rest and the end of the stream."""
    mock.script("key-a-secret", [{"kind": "gated_stream", "gate": "g", "gate_after": 2,
                                  "events": 4}])
    # Under the mock's 10 s gate safety timeout: events held back until the whole answer
    # is there would make this read time out.
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=5)
    try:
        body = json.dumps({"model": MODEL, "stream": True,
                           "messages": [{"role": "user", "content": "hi"}]})
        conn.request("POST", "/v1/chat/completions", body,
                     {"content-type": "application/json", "authorization": "Bearer client"})
        sock = conn.sock
        try:
            r = conn.getresponse()
        except socket.timeout:
            raise AssertionError("no answer head while the mock held the stream's rest back")
        eq(r.status, 200, "stream status")
        eq(r.getheader("x-aor-key"), "A", "stream x-aor-key")
        check(r.getheader("content-type", "").startswith("text/event-stream"),
              "content-type %r" % r.getheader("content-type"))
        first = []
        while len(first) < 2:
            try:
                ln = r.readline()
            except socket.timeout:
                raise AssertionError("the first events did not arrive while the mock held "
                                     "the rest back (got %r)" % first)
            check(ln, "stream ended before the gate opened: %r" % first)
            if ln.startswith(b"data: "):
                first.append(json.loads(ln[6:]))
        eq(first[0]["object"], "chat.completion.chunk", "first event")
        mock.gate("g")
        sock.settimeout(15)
        rest = r.read()
    finally:
        conn.close()
    data = [ln[6:] for ln in rest.split(b"\n") if ln.startswith(b"data: ")]
    eq(len(data), 5, "events after the gate (3 deltas, finish, [DONE]): %r" % rest[:500])
    eq(data[-1], b"[DONE]", "stream ends with [DONE]")
    chunks = first + [json.loads(x) for x in data[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or ""
                   for c in chunks if c.get("choices"))
    eq(text, "Hello from the mock", "streamed text")


def test_stream_through_proxy(env):
    proxy = start_proxy(env)
    mock, d = setup(env, {"http_proxy": proxy.url})
    stream_and_check(mock, d)
    eq(len(proxy.requests()), 1, "the stream went through the proxy")


def test_stream_direct(env):
    proxy = start_proxy(env)
    mock, d = setup(env)
    stream_and_check(mock, d)
    eq(proxy.conns, 0, "connections to the proxy")
    # The connection goes back to the pool after a complete stream.
    status, headers, body = chat(d)
    check_answer(mock, status, headers, body, "A", 1)
    log = mock.log()
    eq(log[1]["conn"], log[0]["conn"], "the request after the stream: upstream connection")


for _t in list(globals().values()):
    if callable(_t) and getattr(_t, "__name__", "").startswith("test_"):
        _t.timeout = 30


def test_out_of_file_descriptors_is_not_the_providers_fault(env):
    """QA: with aord at its descriptor limit, socket() for the upstream failed with EMFILE
    and was recorded as a transient failure of the key (backoff rows, an open circuit,
    429 for every other client). It is aord's own limit: a 502 aor_internal, nothing
    recorded. Plain-HTTP shim connections (the Unix socket, no peer lookup) held open by
    gated streams use the descriptors up until the upstream socket() is the one refused."""
    import resource
    import time

    mock, d = setup(env)
    mock.script("*", [{"kind": "gated_stream", "gate": "fd", "gate_after": 1, "events": 2,
                       "times": -1}])
    body = json.dumps({"model": MODEL, "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = ("AOR/1 api.openai.com 127.0.0.1 80\n"
           "POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\n"
           "Authorization: Bearer c\r\nContent-Type: application/json\r\n"
           "Content-Length: %d\r\n\r\n" % len(body)).encode() + body
    open_fds = len(os.listdir("/proc/%d/fd" % d.pid))
    limit = open_fds + 7
    hard = open_fds + 16  # room to raise the soft limit below (raising a hard one needs root)
    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (limit, hard))
    held, statuses = [], []
    try:
        for i in range(12):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(3)
            s.connect(env.socket_path)
            s.sendall(req)
            head = b""
            while b"\r\n\r\n" not in head:
                try:
                    x = s.recv(4096)
                except socket.timeout:
                    # Not accepted: the count above held a descriptor aord had open only
                    # for a moment (a resolver's socket), so accept() met the limit
                    # before an upstream socket() did. One more descriptor lets this
                    # connection in (aord retries accept every 100 ms); its upstream
                    # socket() is then the one refused.
                    check(head == b"" and limit == open_fds + 7, "no answer: %r" % head)
                    limit += 1
                    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (limit, hard))
                    s.settimeout(10)
                    continue
                if not x:
                    break
                head += x
            statuses.append(head.split(b" ", 2)[1] if head else b"closed")
            held.append(s)
            if statuses[-1] != b"200":
                s.settimeout(2)
                try:
                    while b"}}" not in head:
                        x = s.recv(4096)
                        if not x:
                            break
                        head += x
                except socket.timeout:
                    pass
                check(b"aor_internal" in head, "the refusal is aord's own: %r" % head)
                break
    finally:
        mock.gate("fd")
        for s in held:
            s.close()
    check(b"502" in statuses, "aord reached its limit: %r" % statuses)
    time.sleep(0.5)
    st = d.state()
    eq(st["backoff"], [], "no key backed off for aord's own limit")
    eq(st["breakers"], [], "no circuit opened")
    check("cannot open a socket" in d.stderr_text(), "aord says why")


def test_accept_at_the_descriptor_limit_does_not_spin(env):
    """QA: with aord out of descriptors, its listening socket stayed readable and libevent
    called accept() again at once, spinning a CPU and logging a warning per try (~1 GB
    of stderr in 5 s). The listeners pause instead; one warning; the waiting clients
    are served once descriptors are free."""
    import resource
    import time

    mock, d = setup(env)
    open_fds = len(os.listdir("/proc/%d/fd" % d.pid))
    old = resource.prlimit(d.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (open_fds, old[1]))  # the soft limit
    clients = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(20)]
    try:
        time.sleep(0.3)

        def cpu_s():
            f = open("/proc/%d/stat" % d.pid).read().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

        c0 = cpu_s()
        time.sleep(1.0)
        used = cpu_s() - c0
        check(used < 0.3, "aord used %.2f s of CPU in 1 s at its descriptor limit" % used)
        err = d.stderr_text()
        eq(err.count("Error from accept() call"), 0, "libevent's per-try warnings")
        n = err.count("Too many open files")
        check(1 <= n <= 2, "said once a minute (accept, peer check): %d lines" % n)
    finally:
        for c in clients:
            c.close()
    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, old)
    aortest.wait_until(lambda: d.healthz() == 200, 10, what="aord serves again")


def test_libevent_messages_are_aord_log_lines(env):
    """libevent's own messages (its DNS resolver's "Nameserver ... has failed") were bare
    "[msg] ..." lines on stderr, missing from aord.log (QA). They are aord's log lines now,
    marked as libevent's. A private network namespace whose only nameserver is down."""
    import netns
    why = netns.unavailable()
    if why:
        raise aortest.Skip(why)
    with netns.NetNS(env, {"other.test": ["127.0.0.1"]}) as ns:
        ns._dnsmasq.kill()
        ns._dnsmasq.wait()
        port = aortest.free_port()
        env.set_keys(KEY_A="secret-A")
        env.write_config('[daemon]\nlisten = 127.0.0.1:%d\n[key "A"]\nenv = KEY_A\n'
                         '[provider "p"]\ndialect = openai\nbase_url = https://api.nowhere.test\n'
                         "keys = A\nmodels = *\n" % port)
        d = env.start_daemon()
        st, _, body = d.http("POST", "/v1/chat/completions",
                             json.dumps({"model": "m", "messages": []}).encode(),
                             {"authorization": "Bearer c", "content-type": "application/json"})
        eq(st, 502, "no DNS: the upstream is unreachable (%r)" % body[:200])
        aortest.wait_until(lambda: "libevent: Nameserver 127.0.0.1:53 has failed" in
                           d.stderr_text(), what="the resolver's message as an aord line")
        check("[msg]" not in d.stderr_text(), "no bare libevent line: %s" % d.stderr_text()[-800:])
        log = open(os.path.join(env.env["XDG_STATE_HOME"], "aor", "aord.log")).read()
        check("libevent: Nameserver" in log, "in aord.log too")


def _named_upstreams(env, hosts):
    """aord with one provider per name in hosts (provider "p<i>", model "m<i+1>", base_url
    http://NAME:PORT of one plain mock), key A; returns (daemon, ask) where ask(model)
    posts a chat request on the sidecar -> (status, headers, body)."""
    mock = env.start_mock(tls=False)
    mport = int(mock.url.rsplit(":", 1)[1])
    port = aortest.free_port()
    env.set_keys(KEY_A="secret-A")
    cfg = '[daemon]\nlisten = 127.0.0.1:%d\n[key "A"]\nenv = KEY_A\n' % port
    for i, host in enumerate(hosts):
        cfg += ('[provider "p%d"]\ndialect = openai\nbase_url = http://%s:%d\nkeys = A\n'
                "models = m%d\n" % (i, host, mport, i + 1))
    env.write_config(cfg)
    d = env.start_daemon()

    def ask(model):
        return d.http("POST", "/v1/chat/completions",
                      json.dumps({"model": model, "messages": []}).encode(),
                      {"authorization": "Bearer c", "content-type": "application/json"})

    return d, ask


def test_upstream_lookups_follow_a_changed_etc_hosts(env):
    """QA: aord's resolver read /etc/hosts once: a provider host added there later was
    published to the shim (its lookups use getaddrinfo), which redirected to aord, while
    aord's own lookup of it failed ("could not resolve host") until a restart, and backed
    the key off. A private namespace whose /etc/hosts is a copy, edited in place."""
    import netns
    why = netns.unavailable()
    if why:
        raise aortest.Skip(why)
    with netns.NetNS(env, {"other.test": ["127.0.0.1"]}):
        hosts = env.path("hosts")
        with open("/etc/hosts") as f:
            orig = f.read()
        with open(hosts, "w") as f:
            f.write(orig)
        subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=True)
        d, ask = _named_upstreams(env, ["late.test"])
        st, _, body = ask("m1")
        eq(st, 502, "late.test is not known yet (%r)" % body[:200])
        d.admin("POST", "/admin/api/backoff/clear")
        with open(hosts, "a") as f:  # in place: the bind mount keeps the inode
            f.write("\n127.0.0.1 late.test\n")
        st, _, body = ask("m1")
        eq(st, 200, "late.test through the edited /etc/hosts (%r)" % body[:200])
        check("upstream DNS: /etc/hosts changed" in d.stderr_text(), "said")


def test_upstream_lookups_follow_a_changed_resolv_conf(env):
    """QA: aord's resolver read /etc/resolv.conf once; after a network change rewrote it
    (DHCP, a VPN), every new upstream connection failed ("the DNS server failed") until a
    restart, while the rest of the system resolved. A private namespace: its name server
    at 127.0.0.1 stops, another at 127.0.0.2 starts, resolv.conf is rewritten in place."""
    import netns
    why = netns.unavailable()
    if why:
        raise aortest.Skip(why)
    recs = {"a.test": ["127.0.0.1"], "b.test": ["127.0.0.1"]}
    with netns.NetNS(env, recs) as ns:
        d, ask = _named_upstreams(env, ["a.test", "b.test"])
        st, _, body = ask("m1")
        eq(st, 200, "a.test through the first name server (%r)" % body[:200])
        ns._dnsmasq.kill()
        ns._dnsmasq.wait()
        other = subprocess.Popen(
            [netns.DNSMASQ, "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
             "--no-hosts", "--bind-interfaces", "--listen-address=127.0.0.2", "--port=53",
             "--user=root", "--pid-file=", "--host-record=b.test,127.0.0.1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            aortest.wait_until(lambda: netns._dns_answers("b.test", "127.0.0.2"), 10,
                               what="the second name server")
            with open(ns.resolv, "w") as f:  # in place: the bind mount keeps the inode
                f.write("nameserver 127.0.0.2\noptions timeout:1 attempts:1\n")
            st, _, body = ask("m2")
            eq(st, 200, "b.test, a new upstream, through the new name server (%r)" % body[:200])
            check("upstream DNS: /etc/resolv.conf changed" in d.stderr_text(), "said")
        finally:
            other.kill()
            other.wait()
