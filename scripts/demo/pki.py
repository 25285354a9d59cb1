"""The demo's throwaway credentials, made with the openssl CLI in the work folder (nothing is
committed, everything is deleted with the folder). The same shapes as the nova-hook tests make
(tests/unit/novahook/nhtest.py, tests/unit/agent/test_registry.py) and docs/nova-hook.md
describes for a real deployment:

  nova-hook's HTTPS server certificate (SAN 127.0.0.1) from its own CA;
  Nova's client certificate (CN nova-api) from a CA used only for that;
  the Ed25519 token key pair (nova-hook signs with token.key, agents verify with token.pub);
  the registry CA, nova-hook's registry channel certificate and this agent's client
  certificate (CN = the host name it speaks for, OU = sluice-agent);
  agent-ca, nova-hook's required fallback for guests (the agent registers its own host CA,
  which wins, so guests never see this one).

The host CA that signs guests and backends is not here: sluice-agent-ca makes it (demo step 4).
"""
import os
import subprocess


def _sh(*args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} ...: {r.stderr.strip()}")


def _ca(d, name):
    key, crt = f"{d}/{name}.key", f"{d}/{name}.pem"
    _sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", f"/O=Sluice demo/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return key, crt


def _leaf(d, name, ca, subject, ext):
    key, csr, crt, extfile = (f"{d}/{name}.key", f"{d}/{name}.csr", f"{d}/{name}.pem",
                              f"{d}/{name}.ext")
    _sh("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", key, "-out", csr, "-subj", subject)
    with open(extfile, "w") as f:
        f.write(ext + "\n")
    _sh("openssl", "x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
        "-out", crt, "-days", "1", "-extfile", extfile)
    return key, crt


def make(d, agent_host):
    """Makes everything under d (created 0700); returns a dict of (key, cert) pairs and paths."""
    os.makedirs(d, mode=0o700, exist_ok=True)
    server_ext = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth"
    p = {}
    server_ca = _ca(d, "novahook-server-ca")
    p["server_ca"] = server_ca[1]
    p["server"] = _leaf(d, "novahook-server", server_ca, "/CN=localhost", server_ext)
    nova_ca = _ca(d, "nova-client-ca")
    p["nova_ca"] = nova_ca[1]
    p["nova"] = _leaf(d, "nova-api", nova_ca, "/CN=nova-api", "extendedKeyUsage=clientAuth")
    p["token_key"], p["token_pub"] = f"{d}/token.key", f"{d}/token.pub"
    _sh("openssl", "genpkey", "-algorithm", "ed25519", "-out", p["token_key"])
    _sh("openssl", "pkey", "-in", p["token_key"], "-pubout", "-out", p["token_pub"])
    reg_ca = _ca(d, "registry-ca")
    p["registry_ca"] = reg_ca[1]
    p["registry_server"] = _leaf(d, "registry-server", reg_ca, "/CN=localhost/OU=sluice-novahook",
                                 server_ext)
    p["registry_agent"] = _leaf(d, "agent", reg_ca, f"/CN={agent_host}/OU=sluice-agent",
                                "extendedKeyUsage=clientAuth")
    p["agent_ca"] = _ca(d, "fallback-agent-ca")[1]
    return p
