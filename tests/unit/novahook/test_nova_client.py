#!/usr/bin/env python3
"""sluice-novahook called by Nova's own DynamicJSON vendordata client (Debian's python3-nova:
nova/api/metadata/vendordata_dynamic.py, its keystoneauth session, nova.conf read by oslo.config
from nova-hook/openstack/nova.conf.fragment with the test's paths):

  - an ordinary instance gets its token;
  - an instance at Nova's maxima (user-data of 65535 base64 characters, 128 metadata items with
    255-character keys and values of 255 characters outside the BMP, which json.dumps writes as
    12 bytes each) gets its token with the default max_body;
  - a metadata value holding a NUL character gets its token;
  - a body over max_body gets nothing, and nova-hook logs why;
  - the fragment's CA setting is the one Nova uses: [vendordata_dynamic_auth] cafile alone (no
    vendordata_dynamic_ssl_certfile) does not make Nova trust nova-hook.

Nova's client runs in a child process under Debian's /usr/bin/python3 (each with its own
nova.conf: Nova keeps its session in a module global).
usage: test_nova_client.py SLUICE_NOVAHOOK NH_SEED FRAGMENT"""
import base64
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nhtest  # noqa: E402

DEBIAN_PYTHON = "/usr/bin/python3"
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def client(conf, spec):
    """In the child: Nova's DynamicVendorData(instance).get() with nova.conf = conf."""
    import types

    import nova.conf
    from nova.api.metadata import vendordata_dynamic

    nova.conf.CONF(["--config-file", conf], project="nova", default_config_files=[],
                   default_config_dirs=[])
    with open(spec) as f:
        s = json.load(f)
    inst = types.SimpleNamespace(project_id=s["project"], uuid=s["instance"],
                                 image_ref="fe55c69a-8b2e-4bbc-811a-9ad2023a0426",
                                 user_data=s["user_data"], hostname="moonbuggy",
                                 metadata=s["metadata"],
                                 system_metadata={"boot_roles": "member,reader"})
    print(json.dumps(vendordata_dynamic.DynamicVendorData(inst).get()))


def nova_conf(d, name, fragment, pki, port, drop=(), add=None):
    """The fragment with the test's URL and files; lines whose key is in drop are left out."""
    out, section = [], None
    with open(fragment) as f:
        for line in f:
            m = re.match(r"^\[(\w+)\]", line)
            if m:
                section = m.group(1)
            key = line.split("=", 1)[0].strip() if "=" in line and not line.startswith("#") else ""
            if (section, key) in drop:
                continue
            line = re.sub(r"https://[^/]+/", f"https://localhost:{port}/", line)
            line = re.sub(r"/etc/nova/sluice/novahook-server-ca.pem", pki["server_ca"], line)
            line = re.sub(r"/etc/nova/sluice/nova-client.crt", pki["nova"][1], line)
            line = re.sub(r"/etc/nova/sluice/nova-client.key", pki["nova"][0], line)
            out.append(line)
            if add and m and section in add:
                out.append(add[section] + "\n")
    path = f"{d}/{name}.conf"
    with open(path, "w") as f:
        f.writelines(out)
    return path


def ask(d, conf, user_data="I2Nsb3VkLWNvbmZpZwo=", metadata=None):
    spec = f"{d}/spec.json"
    with open(spec, "w") as f:
        json.dump({"project": nhtest.PROJECT, "instance": nhtest.INSTANCE,
                   "user_data": user_data, "metadata": metadata or {}}, f)
    r = subprocess.run([DEBIAN_PYTHON, __file__, "--client", conf, spec], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        print(r.stderr[-3000:])
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def body_size(user_data, metadata):
    """What Nova's client posts, measured with the same json.dumps."""
    return len(json.dumps({"project-id": nhtest.PROJECT, "instance-id": nhtest.INSTANCE,
                           "image-id": "fe55c69a-8b2e-4bbc-811a-9ad2023a0426",
                           "user-data": user_data, "hostname": "moonbuggy", "metadata": metadata,
                           "boot-roles": "member,reader"}))


def maxima(items):
    user_data = base64.b64encode(os.urandom(65535))[:65535].decode()
    keychars = "abcdefghijklmnopqrstuvwxyz0123456789-_:. "
    metadata = {}
    for i in range(items):
        key = f"{i:04d}" + "".join(keychars[(i + j) % len(keychars)] for j in range(251))
        metadata[key] = "\U0001F600" * 255  # 255 characters, 12 bytes each in the body
    return user_data, metadata


def main():
    novahook, seed, fragment = sys.argv[1], sys.argv[2], sys.argv[3]
    if subprocess.run([DEBIAN_PYTHON, "-c", "import nova.api.metadata.vendordata_dynamic"],
                      capture_output=True).returncode != 0:
        print("FAIL Debian's python3-nova is not installed (scripts/install-deps installs it)")
        return 1
    with tempfile.TemporaryDirectory(prefix="nh-nova-") as d:
        pki = nhtest.make_pki(d)
        db = nhtest.fresh_db(d)
        nhtest.sh(seed, db, "register", "gpu1", "tcp://192.0.2.1:7400", "8")
        nhtest.sh(seed, db, "place", "gpu1", nhtest.INSTANCE, nhtest.PROJECT, "g1.small")
        daemon = nhtest.Daemon(novahook, nhtest.write_config(d, pki, db))  # default max_body
        try:
            cases(d, fragment, pki, daemon)
        finally:
            daemon.stop()
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        return 1
    return 0


def cases(d, fragment, pki, daemon):
    conf = nova_conf(d, "nova", fragment, pki, daemon.port)
    a = ask(d, conf)
    check(a is not None and "token" in a.get("sluice", {}),
          f"Nova's client with the fragment gets a token (got {a})")

    user_data, metadata = maxima(128)
    size = body_size(user_data, metadata)
    a = ask(d, conf, user_data, metadata)
    check(a is not None and "token" in a.get("sluice", {}),
          f"at Nova's maxima ({size} bytes of body) the instance gets a token")
    check(size > 490000, f"that body is Nova's worst case ({size} bytes > 490000)")

    a = ask(d, conf, metadata={"note": "a\x00b", "empty": ""})
    check(a is not None and "token" in a.get("sluice", {}),
          f"a metadata value with a NUL character: token (got {a})")

    user_data, metadata = maxima(300)
    size = body_size(user_data, metadata)
    a = ask(d, conf, user_data, metadata)
    check(a == {"sluice": {}}, f"{size} bytes, over max_body: no token (got {a})")
    check(daemon.wait_log(rf"refused 127\.0\.0\.1: a body of {size} bytes, over max_body "
                          r"1048576.*\(HTTP 413\)") is not None,
          "the refusal is logged with the size and the limit")

    # CA only as a session cafile: Nova's verify= (True: the system CAs) wins, nova-hook is
    # not trusted
    conf2 = nova_conf(d, "nova-cafile", fragment, pki, daemon.port,
                      drop={("api", "vendordata_dynamic_ssl_certfile")},
                      add={"vendordata_dynamic_auth": f"cafile = {pki['server_ca']}"})
    a = ask(d, conf2)
    check(a == {"sluice": {}},
          f"[vendordata_dynamic_auth] cafile alone: Nova does not trust nova-hook (got {a})")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--client":
        client(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(main())
