#!/usr/bin/env python3
"""Registry reporting end to end: test PKI (an agent certificate CN=agent-host-1,
OU=sluice-agent), a sluice-novahook configuration with registry_listen on a free port, then
test_ag_virt's registry mode, which runs the agent in-process against libvirt's test driver and
starts/stops sluice-novahook itself (the registry is down at first).
usage: test_registry.py TEST_AG_VIRT SLUICE_NOVAHOOK SLUICE_REGISTRY"""
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "novahook"))
import nhtest  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    test, daemon, cli = sys.argv[1:4]
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="ag-registry-") as d:
        pki = nhtest.make_pki(d)
        ca = nhtest.make_ca(d, "registry-ca")
        server = nhtest.make_leaf(d, "reg-server", ca, "localhost",
                                  "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                  "extendedKeyUsage=serverAuth", ou="sluice-novahook")
        agent = nhtest.make_leaf(d, "agent", ca, "agent-host-1", "extendedKeyUsage=clientAuth",
                                 ou="sluice-agent")
        port = free_port()
        db = nhtest.fresh_db(d)  # SQLite, or MariaDB in the .mariadb twin
        config = nhtest.write_config(d, pki, db, f"""registry_listen = 127.0.0.1:{port}
registry_ca = {ca[1]}
registry_cert = {server[1]}
registry_key = {server[0]}
""")
        rc = subprocess.run([test, "registry", daemon, config, cli, db,
                             f"tcp://127.0.0.1:{port}", ca[1], agent[1], agent[0]],
                            timeout=110).returncode
    print(f"{time.time() - t0:.1f}s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
