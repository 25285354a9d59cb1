"""A MariaDB server from Debian's package (mariadb-server) for the tests: its own data
directory under /tmp, its own unix socket and TCP port on 127.0.0.1, TLS with a throwaway CA
(made with the openssl CLI), a user `sluice` that must use TLS and may create databases named
nhtest*. Run as root, the server runs as the unprivileged user mysql (the package's).

    server = Server.start(state_dir)   # writes state_dir/state.json
    Server.load(state_dir).stop()

The URL template (state.json "url", also state_dir/url) has {db} where the database name goes:
    mysql+pymysql://sluice:PW@127.0.0.1:PORT/{db}?charset=utf8&ssl_ca=DIR/ca.pem"""
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time

MARIADBD = "/usr/sbin/mariadbd"
INSTALL_DB = "/usr/bin/mariadb-install-db"
CLIENT = "/usr/bin/mariadb"

# small, quick to create; durability as in production (the tests kill nova-hooks, not this)
SERVER_OPTS = ["--innodb-log-file-size=8M", "--innodb-data-file-path=ibdata1:12M:autoextend",
               "--innodb-buffer-pool-size=32M", "--skip-name-resolve", "--max-connections=200",
               "--performance-schema=OFF", "--skip-log-bin"]


def _sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _pki(d):
    """CA, server certificate for 127.0.0.1/localhost."""
    ca_key, ca = f"{d}/ca.key", f"{d}/ca.pem"
    _sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=sluice-test-db-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    key, csr, crt = f"{d}/server.key", f"{d}/server.csr", f"{d}/server.pem"
    _sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    with open(f"{d}/server.ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _sh("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", crt, "-days", "1", "-extfile", f"{d}/server.ext")
    return ca, crt, key


class Server:
    def __init__(self, state):
        self.state = state

    @property
    def url(self):
        return self.state["url"]

    @property
    def sock(self):
        return self.state["socket"]

    def admin(self, sql, db=None):
        """Runs sql as root over the socket; rows as lists of strings."""
        args = [CLIENT, "--no-defaults", "-S", self.sock, "-u", "root", "-N", "-B", "-e", sql]
        if db:
            args.append(db)
        out = _sh(*args).stdout
        return [line.split("\t") for line in out.splitlines()]

    @classmethod
    def load(cls, state_dir):
        with open(f"{state_dir}/state.json") as f:
            return cls(json.load(f))

    @classmethod
    def start(cls, state_dir, timeout=90):
        os.makedirs(state_dir, exist_ok=True)
        root = tempfile.mkdtemp(prefix="sluice-mariadb-")
        os.chmod(root, 0o755)
        data, run = f"{root}/data", f"{root}/run"
        os.makedirs(run)
        ca, crt, key = _pki(root)
        user = []
        if os.geteuid() == 0:
            mysql = pwd.getpwnam("mysql")
            for p in (root, run, key, crt, ca):
                os.chown(p, mysql.pw_uid, mysql.pw_gid)
            user = ["--user=mysql"]
        _sh(INSTALL_DB, "--no-defaults", f"--datadir={data}", *user,
            "--auth-root-authentication-method=socket", "--skip-test-db", *SERVER_OPTS)
        port = _free_port()
        sock, log = f"{run}/mysqld.sock", f"{root}/server.log"
        args = [MARIADBD, "--no-defaults", f"--datadir={data}", *user, f"--socket={sock}",
                f"--port={port}", "--bind-address=127.0.0.1", f"--pid-file={run}/mysqld.pid",
                f"--log-error={log}", f"--ssl-ca={ca}", f"--ssl-cert={crt}", f"--ssl-key={key}",
                *SERVER_OPTS]
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        password = secrets.token_hex(12)
        state = {"root": root, "pid": proc.pid, "port": port, "socket": sock, "ca": ca,
                 "user": "sluice", "password": password,
                 "url": f"mysql+pymysql://sluice:{password}@127.0.0.1:{port}/{{db}}"
                        f"?charset=utf8&ssl_ca={ca}"}
        server = cls(state)
        t0 = time.time()
        while True:
            if proc.poll() is not None:
                raise RuntimeError("mariadbd exited:\n" + open(log).read()[-4000:])
            try:
                server.admin("SELECT 1")
                break
            except subprocess.CalledProcessError:
                if time.time() - t0 > timeout:
                    proc.kill()
                    raise RuntimeError("mariadbd did not answer:\n" + open(log).read()[-4000:])
                time.sleep(0.2)
        server.admin(f"CREATE USER 'sluice'@'%' IDENTIFIED BY '{password}' REQUIRE SSL; "
                     "GRANT ALL PRIVILEGES ON `nhtest%`.* TO 'sluice'@'%'; "
                     "CREATE DATABASE nhtest")
        with open(f"{state_dir}/state.json", "w") as f:
            json.dump(state, f)
        with open(f"{state_dir}/url", "w") as f:
            f.write(state["url"] + "\n")
        return server

    def stop(self, timeout=30):
        pid = self.state["pid"]
        try:
            os.kill(pid, signal.SIGTERM)
            t0 = time.time()
            while time.time() - t0 < timeout:
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(self.state["root"], ignore_errors=True)


def fresh_database(url_template):
    """A new empty database nhtest_<random> on the server of url_template; its URL."""
    name = "nhtest_" + secrets.token_hex(6)
    run(url_template.format(db="nhtest"), f"CREATE DATABASE {name}")
    return url_template.format(db=name)


def parse(url):
    """The parts of a mysql+pymysql:// URL of this module (user, password, host, port, db,
    ssl_ca)."""
    rest = url.split("://", 1)[1]
    auth, rest = rest.split("@", 1)
    user, password = auth.split(":", 1)
    hostport, rest = rest.split("/", 1)
    host, port = hostport.rsplit(":", 1)
    db, _, query = rest.partition("?")
    params = dict(item.split("=", 1) for item in query.split("&") if item)
    return {"user": user, "password": password, "host": host, "port": port, "db": db,
            "ssl_ca": params.get("ssl_ca")}


def run(url, sql):
    """sql on the database of url, with its user over TLS; rows as lists of strings."""
    p = parse(url)
    args = [CLIENT, "--no-defaults", "-h", p["host"], "-P", p["port"], "-u", p["user"],
            f"-p{p['password']}", "-N", "-B", "--ssl-verify-server-cert", "-e", sql]
    if p["ssl_ca"]:
        args.insert(2, f"--ssl-ca={p['ssl_ca']}")
    args.append(p["db"])
    out = _sh(*args).stdout
    return [line.split("\t") for line in out.splitlines()]
