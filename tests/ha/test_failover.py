#!/usr/bin/env python3
"""Several controllers, the real parts: a MariaDB server from Debian's package (the `mariadb`
fixture's, TLS), two sluice-novahook on one database and one token key repository, HAProxy from
Debian's package in front of both (vendordata: HTTPS in, mutual TLS verified, re-encrypted to
the nova-hooks, a request whose nova-hook died retried on the other; registry: TCP), two agents
(the agent's own reporter and usage store: one through HAProxy, one holding both registry
endpoints itself) streaming usage records, and Nova-shaped vendordata POSTs, while nova-hook 1
is killed -9 and restarted, the token keys are rotated, and nova-hook 2 is killed -9 and
restarted. Checked: every POST answered with a token; every token verifies with the public keys
the agents were given before the rotation, is accepted once and refused the second time; every
usage record stored exactly once and counted once by the report; db-sync run twice at once
applies the schema once.
usage: test_failover.py SLUICE_NOVAHOOK SLUICE_REGISTRY HA_AGENT HA_TOKENS"""
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "unit", "novahook"))
import mariadb  # noqa: E402
import nhtest  # noqa: E402

HAPROXY = "/usr/sbin/haproxy"
OU = "sluice-agent"
TOTAL, BATCH, INTERVAL_MS = 1200, 10, 100  # per agent: ~12 s of records
INSTANCES = {"gpu-ha-a": "aaaaaaaa-0000-4000-8000-00000000000a",
             "gpu-ha-b": "bbbbbbbb-0000-4000-8000-00000000000b"}
PROJECT = "f241e906010e4917ae8153f4fb8aa021"
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(*args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)


def nova_body(instance):
    """The body nova/api/metadata/vendordata_dynamic.py POSTs (its seven keys)."""
    return json.dumps({"project-id": PROJECT, "instance-id": instance,
                       "image-id": "fe55c69a-8b2e-4bbc-811a-9ad2023a0426",
                       "user-data": "I2Nsb3VkLWNvbmZpZw==", "hostname": "ha-vm",
                       "metadata": {"role": "test"}, "boot-roles": "member,reader"}).encode()


def pki(d):
    p = nhtest.make_pki(d)  # nova-hook's HTTPS certificate (server CA), Nova's CA and client
    nova_ca = (f"{d}/nova-ca.key", p["nova_ca"])
    # HAProxy: its own client certificate towards the nova-hooks (their client_ca is Nova's CA,
    # client_cn names HAProxy), Nova's server certificate for the VIP
    p["lb_client"] = nhtest.make_leaf(d, "lb-client", nova_ca, "haproxy-vendordata",
                                      "extendedKeyUsage=clientAuth")
    for name, (key, crt) in (("lb_client_pem", p["lb_client"]), ("lb_server_pem", p["server"])):
        p[name] = f"{d}/{name}.pem"
        with open(p[name], "w") as f:
            f.write(open(crt).read() + open(key).read())
    reg_ca = nhtest.make_ca(d, "registry-ca")
    p["reg_ca"] = reg_ca[1]
    p["reg_server"] = nhtest.make_leaf(d, "reg-server", reg_ca, "localhost",
                                       "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                       "extendedKeyUsage=serverAuth", ou="sluice-novahook")
    for host in INSTANCES:
        p[host] = nhtest.make_leaf(d, host, reg_ca, host, "extendedKeyUsage=clientAuth", ou=OU)
    return p


def novahook_config(d, name, p, db, keys, https_port, reg_port):
    path = f"{d}/{name}.conf"
    with open(path, "w") as f:
        f.write(f"""listen = 127.0.0.1:{https_port}
tls_cert = {p['server'][1]}
tls_key = {p['server'][0]}
client_ca = {p['nova_ca']}
client_cn = haproxy-vendordata
token_key_repository = {keys}
agent_ca = {p['agent_ca']}
database = {db}
node_name = {name}
threads = 4
registry_listen = 127.0.0.1:{reg_port}
registry_ca = {p['reg_ca']}
registry_cert = {p['reg_server'][1]}
registry_key = {p['reg_server'][0]}
""")
    os.chmod(path, 0o600)  # it holds the database password
    return path


def haproxy_config(d, p, vd_port, reg_port, nh):
    """nh: [(https_port, registry_port)] of the nova-hooks."""
    vd_servers = "\n".join(
        f"    server nh{i + 1} 127.0.0.1:{h} ssl verify required ca-file {p['server_ca']} "
        f"verifyhost localhost crt {p['lb_client_pem']} check inter 300 fall 2 rise 2"
        for i, (h, _) in enumerate(nh))
    reg_servers = "\n".join(f"    server reg{i + 1} 127.0.0.1:{r} check inter 300 fall 2 rise 2"
                            for i, (_, r) in enumerate(nh))
    path = f"{d}/haproxy.cfg"
    with open(path, "w") as f:
        f.write(f"""global
    log stdout format raw local0
    maxconn 500
    tune.bufsize 131072

defaults
    log global
    timeout connect 1s
    timeout client 30s
    timeout server 10s
    retries 3
    option redispatch 1

frontend vendordata
    mode http
    option httplog
    bind 127.0.0.1:{vd_port} ssl crt {p['lb_server_pem']} ca-file {p['nova_ca']} verify required
    default_backend novahooks

backend novahooks
    mode http
    balance roundrobin
    option http-buffer-request
    retry-on all-retryable-errors
{vd_servers}

frontend registry
    mode tcp
    option tcplog
    bind 127.0.0.1:{reg_port}
    default_backend registries

backend registries
    mode tcp
    balance roundrobin
{reg_servers}
""")
    return path


class Poster(threading.Thread):
    """Nova's metadata API: one POST after the other through the load balancer, alternating the
    two instances, each answer kept."""

    def __init__(self, port, p):
        super().__init__(daemon=True)
        self.port = port
        self.ctx = ssl.create_default_context(cafile=p["server_ca"])
        self.ctx.load_cert_chain(p["nova"][1], p["nova"][0])
        self.stop = threading.Event()
        self.answers = []  # (status, body or error)

    def run(self):
        conn, i = None, 0
        insts = list(INSTANCES.values())
        while not self.stop.is_set():
            body = nova_body(insts[i % 2])
            i += 1
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx,
                                                       timeout=15)
                conn.request("POST", "/v1/vendordata", body=body, headers={
                    "Content-Type": "application/json", "Accept": "application/json",
                    "User-Agent": "openstack-nova-vendordata"})
                r = conn.getresponse()
                self.answers.append((r.status, r.read().decode()))
            except (OSError, http.client.HTTPException) as ex:
                self.answers.append((0, repr(ex)))
                conn = None
            time.sleep(0.02)


def start_novahook(binary, config):
    return nhtest.Daemon(binary, config)


def kill9(nh):
    nh.proc.send_signal(signal.SIGKILL)
    nh.proc.wait(10)
    nh.thread.join(5)


def concurrent_db_sync(registry, template):
    """Two db-syncs at once on a fresh database: the schema lock lets one apply it."""
    url = mariadb.fresh_database(template)
    procs = [subprocess.Popen([registry, "--db", url, "db-sync"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    codes = [p.returncode for p in procs]
    said = sorted("created" if "created" in o else "current" if "current" in o else o + e
                  for o, e in outs)
    check(codes == [0, 0] and said == ["created", "current"],
          f"two db-syncs at once: one created the schema, the other found it current ({said})")
    version = mariadb.run(url, "SELECT version FROM sluice_schema")[0][0]
    check(version == "5", f"schema version {version}")
    mariadb.run(url, "DROP DATABASE " + mariadb.parse(url)["db"])


def main():
    novahook, registry, agent_bin, tokens_bin = sys.argv[1:5]
    with open(os.environ["SLUICE_TEST_MARIADB"]) as f:
        template = f.read().strip()
    t_start = time.time()
    procs = []
    with tempfile.TemporaryDirectory(prefix="sluice-ha-") as d:
        p = pki(d)
        db = mariadb.fresh_database(template)
        keys = f"{d}/token-keys"
        r = run(registry, "token-keys", "setup", "--repository", keys)
        check(r.returncode == 0, "token-keys setup: " + (r.stdout + r.stderr).strip())
        ports = [(free_port(), free_port()) for _ in range(2)]
        confs = [novahook_config(d, f"nh{i + 1}", p, db, keys, h, rp)
                 for i, (h, rp) in enumerate(ports)]
        r = run(registry, "--config", confs[0], "db-sync")
        check(r.returncode == 0 and "created" in r.stdout and "sluice@" in r.stdout and
              mariadb.parse(db)["password"] not in r.stdout + r.stderr,
              "db-sync from nova-hook's configuration: " + (r.stdout + r.stderr).strip())
        concurrent_db_sync(registry, template)
        # what every agent is given (before any rotation)
        bundle = f"{d}/token-keys.pub"
        r = run(registry, "--config", confs[0], "token-keys", "public")
        with open(bundle, "w") as f:
            f.write(r.stdout)
        check(r.returncode == 0 and r.stdout.count("BEGIN PUBLIC KEY") == 2,
              "token-keys public: the staged and the primary key")

        nhs = [start_novahook(novahook, c) for c in confs]
        try:
            failover(d, p, nhs, confs, ports, db, keys, bundle, procs, novahook, registry,
                     agent_bin, tokens_bin)
        finally:
            for pr in procs + [nh.proc for nh in nhs]:
                if pr.poll() is None:
                    pr.kill()
                    pr.wait(10)
            mariadb.run(db, "DROP DATABASE " + mariadb.parse(db)["db"])
    print(f"{time.time() - t_start:.1f}s")
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


def failover(d, p, nhs, confs, ports, db, keys, bundle, procs, novahook, registry, agent_bin,
             tokens_bin):
    if True:
        vd_port, reg_port = free_port(), free_port()
        lb = subprocess.Popen([HAPROXY, "-db", "-f", haproxy_config(d, p, vd_port, reg_port,
                                                                    ports)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append(lb)
        lb_log = []
        threading.Thread(target=lambda: lb_log.extend(lb.stdout), daemon=True).start()
        time.sleep(1.0)
        check(lb.poll() is None, "haproxy running")

        endpoints = {"gpu-ha-a": f"tcp://127.0.0.1:{reg_port}",  # through the load balancer
                     "gpu-ha-b": ",".join(f"tcp://127.0.0.1:{rp}" for _, rp in ports)}
        agents = {}
        for host, inst in INSTANCES.items():
            key, crt = p[host]
            agents[host] = subprocess.Popen(
                [agent_bin, f"{d}/{host}-usage.db", endpoints[host], p["reg_ca"], crt, key, inst,
                 PROJECT, str(TOTAL), str(BATCH), str(INTERVAL_MS)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(agents[host])
        for host, a in agents.items():
            line = a.stdout.readline().strip()
            check(line == "placed", f"{host}: placed its instance ({line})")

        poster = Poster(vd_port, p)
        poster.start()
        time.sleep(2.5)
        kill9(nhs[0])
        print("killed nova-hook 1 (-9)", flush=True)
        time.sleep(2.5)
        nhs[0] = start_novahook(novahook, confs[0])
        print("restarted nova-hook 1", flush=True)
        time.sleep(1.5)
        r = run(registry, "token-keys", "rotate", "--repository", keys)
        check(r.returncode == 0, "token-keys rotate: " + r.stdout.strip())
        for nh in nhs:
            nh.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        kill9(nhs[1])
        print("killed nova-hook 2 (-9)", flush=True)
        time.sleep(2.5)
        nhs[1] = start_novahook(novahook, confs[1])
        print("restarted nova-hook 2", flush=True)
        time.sleep(2.0)
        poster.stop.set()
        poster.join(30)

        outs = {}
        for host, a in agents.items():
            out, err = a.communicate(timeout=150)
            outs[host] = out.strip()
            if a.returncode != 0:
                print(err[-3000:])
            m = re.search(r"generated (\d+) forwarded (\d+) sessions (\d+) pending (\d+)", out)
            check(a.returncode == 0 and m and int(m.group(1)) == TOTAL and int(m.group(4)) == 0
                  and int(m.group(3)) >= 2,
                  f"{host} ({endpoints[host]}): every record acknowledged after reconnecting "
                  f"({outs[host]})")

        # --- vendordata: every POST answered, after the load balancer's retries
        answers = poster.answers
        bad = [a for a in answers if a[0] != 200 or '"token"' not in a[1]]
        check(len(answers) >= 20 and not bad,  # ~300 in a normal build, fewer under ASan
              f"{len(answers)} vendordata POSTs, every one answered 200 with a token "
              f"({len(bad)} not: {bad[:3]})")
        retried = 0
        for line in lb_log:
            # httplog: ... TERMINATION_STATE actconn/feconn/beconn/srv_conn/RETRIES ("+N":
            # redispatched to another server)
            m = re.search(r" [-A-Za-z]{4} \d+/\d+/\d+/\d+/(\+?)(\d+) ", line)
            if m and "novahooks/" in line and (m.group(1) or int(m.group(2)) > 0):
                retried += 1
        print(f"haproxy: {retried} vendordata requests retried or redispatched")
        check(retried > 0, "the load balancer retried requests of a dead nova-hook")

        # --- tokens: verified as agents verify them, accepted once, refused the second time
        tokens = [json.loads(b)["token"] for s, b in answers if s == 200 and '"token"' in b]
        with open(f"{d}/tokens.txt", "w") as f:
            f.write("\n".join(tokens) + "\n")
        r = run(tokens_bin, bundle, f"{d}/tokens.txt", f"{d}/replay.db")
        print(r.stdout.strip(), r.stderr.strip()[-2000:])
        m = re.search(r"tokens (\d+) accepted (\d+) replays_refused (\d+) kids (\d+)", r.stdout)
        check(r.returncode == 0 and m and int(m.group(1)) == len(tokens) and
              int(m.group(2)) == len(tokens) and int(m.group(3)) == len(tokens),
              "every token accepted once by the agents' verifier, refused when replayed")
        check(m is not None and int(m.group(4)) == 2,
              "tokens of both primary keys (before and after the rotation) verified with the "
              "keys handed out before it")
        rows = mariadb.run(db, "SELECT jti, issuer_node FROM tokens")
        issued = {j: n for j, n in rows}
        jtis = [json.loads(nhtest_claims(t))["jti"] for t in tokens]
        check(len(set(jtis)) == len(jtis) and all(j in issued for j in jtis),
              f"every token id delivered is unique and recorded in the database "
              f"({len(jtis)} delivered, {len(issued)} issued)")
        check(sorted(set(issued.values())) == ["nh1", "nh2"], "both nova-hooks issued tokens")

        # --- usage: every record once, counted once
        for host in INSTANCES:
            n, distinct, kernels = (int(v) for v in mariadb.run(
                db, f"SELECT count(*), count(DISTINCT record_id), sum(kernels) FROM usage_records "
                    f"WHERE host = '{host}'")[0])
            check((n, distinct, kernels) == (TOTAL, TOTAL, TOTAL),
                  f"{host}: {n} records stored, {distinct} distinct, {kernels} kernels "
                  f"(sent {TOTAL})")
        r = run(registry, "--config", confs[1], "usage", "--from", "2020-01-01", "--format",
                "json")
        doc = json.loads(r.stdout) if r.returncode == 0 else {}
        kernels = sum(s.get("kernels", 0) for t in doc.get("tenant_usages", [])
                      for s in t.get("server_usages", []))
        check(kernels == 2 * TOTAL, f"sluice-registry usage counts {kernels} kernels "
                                    f"({2 * TOTAL} sent)")
        log = "".join(nh.text() for nh in nhs)
        check("token keys reloaded" in log, "the nova-hooks loaded the rotated keys")

        for nh in nhs:
            rc, _ = nh.stop()
            check(rc == 0, "nova-hook stopped cleanly")
        lb.terminate()
        lb.wait(10)


def nhtest_claims(token):
    """The claims of a token, unverified (for ids)."""
    import base64
    part = token.split(".")[1]
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode()


if __name__ == "__main__":
    sys.exit(main())
