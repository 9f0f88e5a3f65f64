"""Test CA and server certificate for the mock provider, made with the openssl CLI.

ensure_tls(dir, names) leaves in `dir`:
  ca.pem, ca.key (0600)   a test CA (ECDSA P-256, critical CA:TRUE, keyCertSign+cRLSign);
                          reused when both files already exist
  server.pem, server.key  a leaf for localhost, 127.0.0.1, ::1 and `names`
                          (SAN), EKU serverAuth, signed by the CA; always remade
A lock file serialises two mocks that share a directory.
"""

import fcntl
import ipaddress
import os
import secrets
import subprocess

_CA_CNF = """\
[req]
distinguished_name = dn
prompt = no
x509_extensions = v3_ca
[dn]
CN = aor mockprov test CA
O = aor tests
[v3_ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
"""

_LEAF_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = localhost
O = aor tests
[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = @alt
[alt]
"""


class TlsError(Exception):
    """openssl failed; the message carries its stderr."""


def _run(args, cwd):
    r = subprocess.run(
        ["openssl"] + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    if r.returncode != 0:
        raise TlsError(
            "openssl %s failed (exit %d): %s" % (args[0], r.returncode, r.stderr.strip())
        )


def _alt_names(names):
    dns, ips = ["localhost"], ["127.0.0.1", "::1"]
    for n in names:
        try:
            ip = str(ipaddress.ip_address(n))
            if ip not in ips:
                ips.append(ip)
        except ValueError:
            if n not in dns:
                dns.append(n)
    lines = ["DNS.%d = %s" % (i + 1, d) for i, d in enumerate(dns)]
    lines += ["IP.%d = %s" % (i + 1, ip) for i, ip in enumerate(ips)]
    return "\n".join(lines) + "\n"


def _write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def ensure_tls(tls_dir, names=()):
    """Create (or reuse) the CA and make a fresh server cert; returns a dict of paths.

    Raises TlsError when openssl fails, OSError when the directory is unusable.
    """
    os.makedirs(tls_dir, mode=0o700, exist_ok=True)
    p = {k: os.path.join(tls_dir, k) for k in ("ca.pem", "ca.key", "server.pem", "server.key")}
    with open(os.path.join(tls_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (os.path.exists(p["ca.pem"]) and os.path.exists(p["ca.key"])):
            _write(os.path.join(tls_dir, "ca.cnf"), _CA_CNF)
            _run(
                ["req", "-x509", "-new", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-sha256", "-days", "3650",
                 "-config", "ca.cnf", "-keyout", "ca.key.tmp", "-out", "ca.pem.tmp"],
                tls_dir,
            )  # fmt: skip
            os.chmod(os.path.join(tls_dir, "ca.key.tmp"), 0o600)
            os.replace(os.path.join(tls_dir, "ca.key.tmp"), p["ca.key"])
            os.replace(os.path.join(tls_dir, "ca.pem.tmp"), p["ca.pem"])
        _write(os.path.join(tls_dir, "leaf.cnf"), _LEAF_CNF + _alt_names(names))
        _run(
            ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-config", "leaf.cnf", "-keyout", "server.key.tmp", "-out", "server.csr"],
            tls_dir,
        )  # fmt: skip
        _run(
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-set_serial", "0x" + secrets.token_hex(12), "-days", "365", "-sha256",
             "-extfile", "leaf.cnf", "-extensions", "leaf", "-out", "server.pem.tmp"],
            tls_dir,
        )  # fmt: skip
        os.chmod(os.path.join(tls_dir, "server.key.tmp"), 0o600)
        os.replace(os.path.join(tls_dir, "server.key.tmp"), p["server.key"])
        os.replace(os.path.join(tls_dir, "server.pem.tmp"), p["server.pem"])
    return p
