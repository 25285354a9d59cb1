"""Shared helpers for the nova-hook Python tests: throwaway PKI made with the openssl CLI at test
time (nothing committed), and running sluice-novahook on an ephemeral port of 127.0.0.1."""
import os
import re
import subprocess
import threading
import time

INSTANCE = "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60"
PROJECT = "f241e906010e4917ae8153f4fb8aa021"


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, **kw)


def make_ca(d, name):
    key, crt = f"{d}/{name}.key", f"{d}/{name}.crt"
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
       "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", f"/CN={name}",
       "-addext", "basicConstraints=critical,CA:TRUE",
       "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return key, crt


def make_leaf(d, name, ca, cn, ext, ou=None):
    key, csr, crt = f"{d}/{name}.key", f"{d}/{name}.csr", f"{d}/{name}.crt"
    subj = f"/CN={cn}" + (f"/OU={ou}" if ou else "")
    sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
       "-nodes", "-keyout", key, "-out", csr, "-subj", subj)
    extfile = f"{d}/{name}.ext"
    with open(extfile, "w") as f:
        f.write(ext + "\n")
    sh("openssl", "x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
       "-out", crt, "-days", "1", "-extfile", extfile)
    return key, crt


def make_pki(d):
    """Server CA + server cert, Nova's client CA + cert, a rogue CA + cert, token key pair,
    the agent CA handed to guests."""
    p = {}
    server_ca = make_ca(d, "server-ca")
    p["server_ca"] = server_ca[1]
    p["server"] = make_leaf(d, "server", server_ca, "localhost",
                            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                            "extendedKeyUsage=serverAuth")
    nova_ca = make_ca(d, "nova-ca")
    p["nova_ca"] = nova_ca[1]
    p["nova"] = make_leaf(d, "nova", nova_ca, "nova-api", "extendedKeyUsage=clientAuth")
    p["nova_other_cn"] = make_leaf(d, "nova2", nova_ca, "somebody", "extendedKeyUsage=clientAuth")
    rogue_ca = make_ca(d, "rogue-ca")
    p["rogue"] = make_leaf(d, "rogue", rogue_ca, "nova-api", "extendedKeyUsage=clientAuth")
    p["token_key"] = f"{d}/token.key"
    p["token_pub"] = f"{d}/token.pub"
    sh("openssl", "genpkey", "-algorithm", "ed25519", "-out", p["token_key"])
    sh("openssl", "pkey", "-in", p["token_key"], "-pubout", "-out", p["token_pub"])
    p["agent_ca"] = make_ca(d, "agent-ca")[1]
    return p


def write_config(d, pki, db, extra=""):
    path = f"{d}/novahook.conf"
    with open(path, "w") as f:
        f.write(f"""# test configuration
listen = 127.0.0.1:0
tls_cert = {pki['server'][1]}
tls_key = {pki['server'][0]}
client_ca = {pki['nova_ca']}
client_cn = nova-api
token_key = {pki['token_key']}
agent_ca = {pki['agent_ca']}
database = {db}
threads = 2
{extra}""")
    return path


class Daemon:
    """sluice-novahook in the background; its stderr is collected in .log."""

    def __init__(self, binary, config):
        self.proc = subprocess.Popen([binary, "--config", config], stderr=subprocess.PIPE,
                                     text=True)
        self.log = []
        self.port = None
        ready = threading.Event()

        def pump():
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on https://127\.0\.0\.1:(\d+)/", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.thread = threading.Thread(target=pump, daemon=True)
        self.thread.start()
        ready.wait(20)
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("sluice-novahook did not start:\n" + "".join(self.log))

    def wait_log(self, pattern, timeout=10):
        """The first match of pattern in the log, waiting up to timeout seconds."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            m = re.search(pattern, self.text())
            if m:
                return m
            time.sleep(0.05)
        return None

    def stop(self, timeout=15):
        self.proc.terminate()
        t0 = time.time()
        rc = self.proc.wait(timeout)
        self.thread.join(5)
        return rc, time.time() - t0

    def text(self):
        return "".join(self.log)
