#!/usr/bin/env python3
"""Usage forwarding end to end: test PKI (an agent certificate CN=agent-host-1,
OU=sluice-agent), usage_forward (the agent's registry thread over its usage store) started while
the registry is still down, sluice-novahook started a second later; every record must reach the
registry, and again after the forwarded marks are lost, and be stored there exactly once, with
what the agent adds (name, domain, tier, share) and its shared GPU time, only once that is final:
the registry's sum of it is the agent's.
usage: test_forward.py USAGE_FORWARD SLUICE_NOVAHOOK"""
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "novahook"))
import nhtest  # noqa: E402

N = 40


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    forward, daemon = sys.argv[1:3]
    with tempfile.TemporaryDirectory(prefix="ag-usage-fwd-") as d:
        pki = nhtest.make_pki(d)
        ca = nhtest.make_ca(d, "registry-ca")
        server = nhtest.make_leaf(d, "reg-server", ca, "localhost",
                                  "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                  "extendedKeyUsage=serverAuth", ou="sluice-novahook")
        agent = nhtest.make_leaf(d, "agent", ca, "agent-host-1", "extendedKeyUsage=clientAuth",
                                 ou="sluice-agent")
        port = free_port()
        rdb = nhtest.fresh_db(d)
        config = nhtest.write_config(d, pki, rdb, f"""registry_listen = 127.0.0.1:{port}
registry_ca = {ca[1]}
registry_cert = {server[1]}
registry_key = {server[0]}
""")
        fwd = subprocess.Popen([forward, f"{d}/usage.db", f"tcp://127.0.0.1:{port}", ca[1],
                                agent[1], agent[0], str(N)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)  # the registry is down: the agent keeps the records and retries
        nh = nhtest.Daemon(daemon, config)
        try:
            out, err = fwd.communicate(timeout=100)
        finally:
            nh.stop()
        print(out, err, sep="\n")
        if fwd.returncode != 0:
            print("usage_forward failed; registry log:\n" + nh.text())
            return 1
        rows, distinct, named = nhtest.query(
            rdb, "SELECT count(*), count(DISTINCT record_id), sum(instance_name = 'web-1' AND "
            "domain_name = 'instance-00000001' AND sla_tier = 'silver' AND gpu_share = 0.5) "
            "FROM usage_records")[0]
        hosts = {h for (h,) in nhtest.query(rdb, "SELECT DISTINCT host FROM usage_records")}
        assert (rows, distinct, named) == (N, N, N), (rows, distinct, named)
        assert hosts == {"agent-host-1"}, hosts
        reported, shared = nhtest.query(
            rdb, "SELECT count(gpu_shared_ns), sum(gpu_shared_ns) FROM usage_records")[0]
        agent = [int(line.split()[1]) for line in out.splitlines()
                 if line.startswith("agent_shared_ns")]
        # N - 4 records busy in pairs for 1 s: 0.5 s each
        assert reported == N and agent == [int(shared)] and int(shared) == (N - 4) * 500000000, \
            (reported, shared, agent)
        forwarded = [int(line.split()[1]) for line in out.splitlines()
                     if line.startswith("forwarded")]
        assert forwarded[0] == N and forwarded[-1] == 2 * N, forwarded
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
