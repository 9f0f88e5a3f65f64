"""Trust end to end (spec §2 "Trust", issue 4 items 2 and 7).

* NODE_EXTRA_CA_CERTS set by the user is merged with aor's CA by the shim: Node then
  trusts both the user's own CA (a second mock provider with its own test CA, reached
  directly) and aor's CA (api.openai.com through the shim and aord).
* The local CA carries critical name constraints: real OpenSSL clients (curl, Python,
  Node) accept it for the intercepted hosts and reject a leaf of that CA for any other
  name (made in the test with the CA's key: aord passes connections without an
  intercepted SNI through, spec §2)."""
import glob
import os
import subprocess

import aortest
from aortest import check, eq

CHAT = '{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'

# Prints "extra <NODE_EXTRA_CA_CERTS>", then "user <result>" for a GET of argv[1]
# (the user's own server) and "aor <result>" for a chat request to api.openai.com;
# <result> is "status N [x-aor-provider]" or "error CODE".
NODE_CLIENT = r"""
const https = require('https');
function req(url, body) {
  return new Promise((resolve) => {
    const r = https.request(url, { method: body ? 'POST' : 'GET', timeout: 20000,
        headers: body ? { 'content-type': 'application/json',
                          'authorization': 'Bearer client-token' } : {} }, (res) => {
      res.resume();
      res.on('end', () => resolve('status ' + res.statusCode + ' ' +
                                  (res.headers['x-aor-provider'] || '-')));
    });
    r.on('error', (e) => resolve('error ' + (e.code || e.message)));
    r.on('timeout', () => r.destroy(new Error('timeout')));
    if (body) r.write(body);
    r.end();
  });
}
(async () => {
  console.log('extra ' + process.env.NODE_EXTRA_CA_CERTS);
  console.log('user ' + await req(process.argv[1] + '/v1/models'));
  console.log('aor ' + await req('https://api.openai.com/v1/chat/completions', process.argv[2]));
})();
"""


def setup(env):
    """Mock provider behind aord (api.openai.com) + a started aord."""
    mock = env.start_mock(tls=True)
    port = aortest.free_port()
    env.set_keys(KEY_A="key-a-secret")
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "A"]
        env = KEY_A
        [provider "openai"]
        dialect = openai
        base_url = {mock.url}
        intercept = api.openai.com
        ca_file = {mock.ca_path}
        keys = A
        models = gpt-4o-mini
        """)
    d = env.start_daemon()
    return mock, d


def node_run(env, user_url, extra_env):
    rc, out, err = env.run_client(["node", "-e", NODE_CLIENT, user_url, CHAT],
                                  extra_env=extra_env)
    eq(rc, 0, "node exit (stderr: %s)" % err[-2000:])
    res = {}
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        res[k] = v
    return res


def test_node_extra_ca_certs_merged(env):
    if subprocess.run(["sh", "-c", "command -v node"], stdout=subprocess.DEVNULL).returncode:
        raise aortest.Skip("needs node")
    mock, d = setup(env)
    # the user's own server, with its own CA (not configured in aor: reached directly)
    own = env.start_mock(tls=True)
    with open(own.ca_path) as f:
        user_ca = f.read()
    with open(env.ca_path) as f:
        aor_ca = f.read()
    data_dir = os.path.dirname(env.ca_path)

    res = node_run(env, own.tls_url, {"NODE_EXTRA_CA_CERTS": own.ca_path})
    merged = res.get("extra", "")
    check(merged.startswith(os.path.join(data_dir, "node-extra-ca-")) and merged.endswith(".pem"),
          "NODE_EXTRA_CA_CERTS points to a merged file in the data dir: %r" % merged)
    with open(merged) as f:
        text = f.read()
    eq(text, user_ca + ("" if user_ca.endswith("\n") else "\n") + aor_ca,
       "merged file = the user's CA file, then ca.pem")
    eq(oct(os.stat(merged).st_mode & 0o777), "0o644", "merged file mode")
    check(res.get("user", "").startswith("status "),
          "Node still trusts the user's CA: %r" % res.get("user"))
    eq(res.get("aor"), "status 200 openai", "Node trusts aor's CA through the shim")

    # a child of a merged process inherits the merged file; nothing new is written
    before = sorted(glob.glob(os.path.join(data_dir, "node-extra-ca-*")))
    res = node_run(env, own.tls_url, {"NODE_EXTRA_CA_CERTS": merged})
    eq(res.get("extra"), merged, "the merged file is kept as it is")
    eq(res.get("aor"), "status 200 openai", "aor through the shim with the merged file")
    eq(sorted(glob.glob(os.path.join(data_dir, "node-extra-ca-*"))), before, "merged files")

    # control: with AOR_NO_TRUST=1 the shim leaves the variable alone and Node does not
    # trust aor, so the checks above can fail
    res = node_run(env, own.tls_url, {"NODE_EXTRA_CA_CERTS": own.ca_path, "AOR_NO_TRUST": "1"})
    eq(res.get("extra"), own.ca_path, "AOR_NO_TRUST=1 leaves NODE_EXTRA_CA_CERTS alone")
    check(res.get("user", "").startswith("status "), "user CA still trusted: %r" % res.get("user"))
    check(res.get("aor", "").startswith("error "),
          "without the merge Node rejects aor's certificate: %r" % res.get("aor"))


test_node_extra_ca_certs_merged.timeout = 90

# Python: TLS to api.openai.com through the shim with SNI (hostname checked), then to a
# test server (argv[2] = port) whose leaf for "evil.example" is signed with aor's CA key:
# outside the CA's name constraints. Prints "sni ok ..." / "outside <verify message>".
PY_CLIENT = r"""
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
with socket.create_connection(("api.openai.com", 443), timeout=10) as s:
    with ctx.wrap_socket(s, server_hostname="api.openai.com") as t:
        print("sni ok", t.version())
with socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=10) as s:
    try:
        with ctx.wrap_socket(s, server_hostname="evil.example") as t:
            print("outside accepted")
    except ssl.SSLCertVerificationError as e:
        print("outside", e.verify_message)
"""

NODE_CLIENT_NC = r"""
const tls = require('tls'), fs = require('fs');
const ca = fs.readFileSync(process.argv[1]);
function go(opts) {
  return new Promise((resolve) => {
    const s = tls.connect(Object.assign({ ca }, opts), () => {
      resolve('ok ' + s.authorized); s.end(); });
    s.on('error', (e) => resolve('error ' + e.message));
  });
}
(async () => {
  console.log('sni ' + await go({ host: 'api.openai.com', port: 443,
                                  servername: 'api.openai.com' }));
  console.log('outside ' + await go({ host: '127.0.0.1', port: +process.argv[2],
                                      servername: 'evil.example' }));
})();
"""


def _outside_server(env, tmp):
    """A TLS server on loopback with a leaf for evil.example signed by aor's own CA key
    (a name outside its constraints; since 2026-12-01 aord never makes such a leaf: a
    connection without an intercepted SNI is passed through). Returns its port."""
    import socket
    import ssl
    import threading
    ca_key = os.path.join(os.path.dirname(env.ca_path), "ca.key")
    key, csr, crt, ext = (os.path.join(tmp, n) for n in ("l.key", "l.csr", "l.pem", "l.ext"))
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:evil.example\n")
    for cmd in (["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-nodes", "-keyout", key, "-subj", "/CN=evil.example", "-out", csr],
                ["openssl", "x509", "-req", "-in", csr, "-CA", env.ca_path, "-CAkey", ca_key,
                 "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", crt]):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(crt, key)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)

    def serve():
        while True:
            try:
                c, _ = lsock.accept()
            except OSError:
                return
            try:
                with sctx.wrap_socket(c, server_side=True) as t:
                    t.recv(1)
            except (OSError, ssl.SSLError):
                pass

    threading.Thread(target=serve, daemon=True).start()
    return lsock.getsockname()[1]


def test_ca_name_constraints_in_real_clients(env):
    import tempfile
    mock, d = setup(env)
    txt = subprocess.run(["openssl", "x509", "-in", env.ca_path, "-noout", "-text"],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    check("X509v3 Name Constraints: critical" in txt, "ca.pem has critical name constraints")
    for name in ("DNS:api.openai.com", "DNS:api.anthropic.com", "DNS:api.x.ai",
                 "IP:127.0.0.0/255.0.0.0", "IP:127.0.0.1/255.255.255.255"):
        check(name in txt, "ca.pem permits %s:\n%s" % (name, txt))
    check("Excluded" not in txt, "no excluded subtrees")

    # curl (OpenSSL): the constrained CA is accepted for the intercepted host
    r = env.curl(["https://api.openai.com/v1/chat/completions", "-H",
                  "Authorization: Bearer client-token", "-H", "Content-Type: application/json",
                  "-d", CHAT])
    eq(r.status, 200, "curl through the shim (stderr %s)" % r.stderr)

    # Python (OpenSSL): accepted with SNI; a leaf of aor's CA for a name outside the
    # constraints is rejected by the client itself
    port = _outside_server(env, tempfile.mkdtemp(prefix="aor-nc-"))
    rc, out, err = env.run_client(["python3", "-c", PY_CLIENT, env.ca_path, str(port)])
    eq(rc, 0, "python exit (stderr %s)" % err[-2000:])
    lines = out.splitlines()
    check(lines and lines[0].startswith("sni ok"), "python with SNI: %r" % out)
    eq(lines[1:], ["outside permitted subtree violation"], "python, a name outside")

    if subprocess.run(["sh", "-c", "command -v node"], stdout=subprocess.DEVNULL).returncode:
        return
    rc, out, err = env.run_client(["node", "-e", NODE_CLIENT_NC, env.ca_path, str(port)])
    eq(rc, 0, "node exit (stderr %s)" % err[-2000:])
    lines = out.splitlines()
    eq(lines[0], "sni ok true", "node with SNI")
    # Node's error code for this X509 error is "UNSPECIFIED"; the message is OpenSSL's
    eq(lines[1], "outside error permitted subtree violation", "node, a name outside")


test_ca_name_constraints_in_real_clients.timeout = 90


def _foreign_pem():
    """A PEM certificate that is not aor's (the system store's first), or Skip."""
    for path in ["/etc/ssl/certs/ca-certificates.crt"] + sorted(glob.glob("/etc/ssl/certs/*.pem")):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        start = text.find("-----BEGIN CERTIFICATE-----")
        end = text.find("-----END CERTIFICATE-----", start)
        if start >= 0 and end > start:
            return text[start:end + len("-----END CERTIFICATE-----")] + "\n"
    raise aortest.Skip("no system CA certificate to use as the user's own bundle")


def test_user_ca_bundle_trap_is_reported(env):
    """QA trust trap: CURL_CA_BUNDLE already set to another bundle is left alone (spec §2
    "Trust"), so curl through `aor run` fails with exit 60 — and aor said nothing. Now one
    stderr line names the variable, why and the fix; after the fix (the aor CA added to
    that bundle) curl works and the line is gone."""
    mock, d = setup(env)
    foreign = env.path("corp.pem")
    with open(foreign, "w") as f:
        f.write(_foreign_pem())
    aor = os.path.join(env.build, "aor")
    args = [aor, "run", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
            "https://api.openai.com/v1/chat/completions", "-H",
            "Authorization: Bearer client-token", "-H", "Content-Type: application/json",
            "-d", CHAT]
    rc, out, err = env.run_client(args, preload=False, extra_env={"CURL_CA_BUNDLE": foreign})
    eq(rc, 60, "curl with the user's CURL_CA_BUNDLE does not trust aor (stderr %r)" % err)
    lines = [ln for ln in err.splitlines() if ln.startswith("aor: CURL_CA_BUNDLE=")]
    eq(len(lines), 1, "aor run says why, once: %r" % err)
    check("will not trust aor's CA" in lines[0] and "unset it, or add %s to that bundle"
          % env.ca_path in lines[0], lines[0])
    # aord says so too, without AOR_DEBUG (QA: a rustls client's "UnknownIssuer" left
    # nothing in aord.log): the host, the client's alert, where to read on.
    aortest.wait_until(lambda: "refused aor's certificate for api.openai.com" in d.stderr_text(),
                       what="aord's line about the refused certificate")
    line = [ln for ln in d.stderr_text().splitlines() if "refused aor's certificate" in ln][0]
    check("unknown ca" in line and "docs/tls.md" in line, line)

    with open(foreign, "a") as f, open(env.ca_path) as ca:
        f.write(ca.read())
    rc, out, err = env.run_client(args, preload=False, extra_env={"CURL_CA_BUNDLE": foreign})
    eq((rc, out), (0, "200"), "with the aor CA added to that bundle curl works (stderr %r)" % err)
    check("CURL_CA_BUNDLE=" not in err, "and nothing is said: %r" % err)


SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def test_system_bundle_in_the_variables_is_not_a_trap(env):
    """Many images export SSL_CERT_FILE / CURL_CA_BUNDLE / REQUESTS_CA_BUNDLE pointing at
    the system's own bundle (this CI machine does). That is not "set to something else"
    (spec §2 "Trust"): bundle.pem holds those CAs plus aor's, so `aor run` and the plain
    shim point the variables at it, and curl reaches api.openai.com through aor instead of
    failing with exit 60 (QA: the first README command failed on this machine)."""
    if not os.path.exists(SYSTEM_BUNDLE):
        raise aortest.Skip("no %s here" % SYSTEM_BUNDLE)
    mock, d = setup(env)
    system = {v: SYSTEM_BUNDLE for v in ("SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE")}
    curl = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
            "https://api.openai.com/v1/chat/completions", "-H",
            "Authorization: Bearer client-token", "-H", "Content-Type: application/json",
            "-d", CHAT]  # fmt: skip
    aor = os.path.join(env.build, "aor")
    rc, out, err = env.run_client([aor, "run", "--"] + curl, preload=False, extra_env=system)
    eq((rc, out), (0, "200"), "aor run -- curl with the system bundle set (stderr %r)" % err)
    check("CA_BUNDLE=" not in err and "SSL_CERT_FILE=" not in err, "no trust warning: %r" % err)
    rc, out, err = env.run_client(curl, extra_env=system)
    eq((rc, out), (0, "200"), "LD_PRELOAD curl with the system bundle set (stderr %r)" % err)
    py = ("import os, ssl, urllib.request as u; r = u.urlopen(u.Request("
          "'https://api.openai.com/v1/chat/completions', data=os.environ['BODY'].encode(), "
          "headers={'Authorization': 'Bearer client-token', 'Content-Type': "
          "'application/json'}), context=ssl.create_default_context("
          "cafile=os.environ['REQUESTS_CA_BUNDLE'])); print(r.status)")  # fmt: skip
    rc, out, err = env.run_client(["python3", "-c", py], extra_env=dict(system, BODY=CHAT))
    eq((rc, out.strip()), (0, "200"), "Python with REQUESTS_CA_BUNDLE (stderr %r)" % err)
    rc, out, err = env.run_client([aor, "doctor"], preload=False, extra_env=system)
    check("points to the system's CA bundle %s" % SYSTEM_BUNDLE in out + err,
          "aor doctor explains it: %r" % (out + err))  # fmt: skip
