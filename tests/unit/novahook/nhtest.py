"""Shared helpers for the nova-hook Python tests: throwaway PKI made with the openssl CLI at test
time (nothing committed), running sluice-novahook on an ephemeral port of 127.0.0.1, and the
registry database of a test: SQLite, or MariaDB in the .mariadb twins of ctest
(SLUICE_TEST_MARIADB names the URL file of the `mariadb` fixture's server, tests/ha)."""
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ha"))
import mariadb  # noqa: E402

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


def engine():
    """'mariadb' when this run is a .mariadb twin, else 'sqlite'."""
    return "mariadb" if os.environ.get("SLUICE_TEST_MARIADB") else "sqlite"


def fresh_db(d):
    """The registry database of this test: d/registry.db, or a new database on the fixture's
    MariaDB server with its schema made by `sluice-registry db-sync` (SLUICE_TEST_REGISTRY), as
    an operator makes it before starting nova-hooks."""
    if engine() == "sqlite":
        return f"{d}/registry.db"
    with open(os.environ["SLUICE_TEST_MARIADB"]) as f:
        url = mariadb.fresh_database(f.read().strip())
    sh(os.environ["SLUICE_TEST_REGISTRY"], "--db", url, "db-sync")
    return url


def _typed(v):
    if v == "NULL":
        return None
    return int(v) if re.fullmatch(r"-?[0-9]+", v) else v


def query(db, sql):
    """Rows of sql on the registry database db (a SQLite path or a MariaDB URL), as tuples."""
    if "://" not in db:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return [tuple(r) for r in con.execute(sql)]
        finally:
            con.close()
    return [tuple(_typed(v) for v in row) for row in mariadb.run(db, sql)]


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
