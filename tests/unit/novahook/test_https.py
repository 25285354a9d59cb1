#!/usr/bin/env python3
"""sluice-novahook over HTTPS, as Nova's metadata API calls it (requests: POST, JSON headers,
User-Agent openstack-nova-vendordata, TLS with a client certificate): valid / missing / foreign
client certificates, known and unknown instances, malformed and huge bodies, wrong method and
path; the token checked with the agents' public key by the openssl CLI; latency; SIGTERM.
usage: test_https.py SLUICE_NOVAHOOK NH_SEED"""
import base64
import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nhtest  # noqa: E402

SECRET = "do-not-log-this-s3cr3t"
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def ctx(pki, cert=None):
    c = ssl.create_default_context(cafile=pki["server_ca"])
    if cert:
        c.load_cert_chain(cert[1], cert[0])
    return c


def nova_body(instance, project):
    # the keys nova/api/metadata/vendordata_dynamic.py sends
    return json.dumps({
        "project-id": project, "instance-id": instance,
        "image-id": "fe55c69a-8b2e-4bbc-811a-9ad2023a0426",
        "user-data": base64.b64encode(("#cloud-config\npassword: " + SECRET).encode()).decode(),
        "hostname": "moonbuggy", "metadata": {"api_key": SECRET}, "boot-roles": "member,reader",
    })


HEADERS = {"Content-Type": "application/json", "Accept": "application/json",
           "User-Agent": "openstack-nova-vendordata"}


def post(port, context, body, path="/v1/vendordata", method="POST", conn=None):
    own = conn is None
    if own:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    data = body.encode() if isinstance(body, str) else body
    conn.request(method, path, body=data, headers=HEADERS)
    r = conn.getresponse()
    out = r.status, r.read(), r.getheader("Content-Type")
    if own:
        conn.close()
    return out


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def verify_with_openssl(d, token, pub):
    """The signature checked by an independent implementation (openssl pkeyutl, Ed25519)."""
    h, p, s = token.split(".")
    with open(f"{d}/signed", "wb") as f:
        f.write(f"{h}.{p}".encode())
    with open(f"{d}/sig", "wb") as f:
        f.write(b64d(s))
    r = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin",
                        "-in", f"{d}/signed", "-sigfile", f"{d}/sig"], capture_output=True)
    return r.returncode == 0


def main():
    novahook, seed = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="nh-https-") as d:
        pki = nhtest.make_pki(d)
        db = nhtest.fresh_db(d)
        nhtest.sh(seed, db, "register", "gpu1", "tcp://192.0.2.1:7400", "8")
        nhtest.sh(seed, db, "place", "gpu1", nhtest.INSTANCE, nhtest.PROJECT, "g1.small")
        conf = nhtest.write_config(d, pki, db)
        r = subprocess.run([novahook, "--config", conf, "--check-config"], capture_output=True,
                           text=True)
        check(r.returncode == 0, "--check-config accepts the configuration")
        daemon = nhtest.Daemon(novahook, conf)
        port = daemon.port
        good = ctx(pki, pki["nova"])
        try:
            run_cases(d, pki, port, good)
            measure(port, good)
        finally:
            rc, took = daemon.stop()
        check(rc == 0 and took < 10, f"SIGTERM: clean exit (rc {rc}, {took:.2f} s)")
        log = daemon.text()
        check(SECRET not in log and "cloud-config" not in log and "moonbuggy" not in log,
              "the log holds no user-data, metadata or hostname")
        check("token" in log and "issued" in log, "issued tokens are logged (by id)")
        check("no client certificate" in log, "a missing client certificate is logged")
        for what in ["over max_body 1048576", "(HTTP 405)", "(HTTP 404)"]:
            check(what in log, f"refusal logged: {what}")
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        return 1
    return 0


def run_cases(d, pki, port, good):
    # --- a known instance, valid client certificate
    t0 = time.time()
    st, body, ctype = post(port, good, nova_body(nhtest.INSTANCE, nhtest.PROJECT))
    check(st == 200 and ctype == "application/json", f"known instance: 200 JSON (got {st})")
    a = json.loads(body)
    check(set(a) == {"token", "ca", "enroll_endpoint", "expires"}, f"answer keys {sorted(a)}")
    with open(pki["agent_ca"]) as f:
        check(a["ca"] == f.read(), "ca is the agent CA PEM")
    check(a["enroll_endpoint"] == "tcp://192.0.2.1:7400", "enroll_endpoint of the agent")
    token = a["token"]
    hdr = json.loads(b64d(token.split(".")[0]))
    claims = json.loads(b64d(token.split(".")[1]))
    check(hdr.get("alg") == "EdDSA" and hdr.get("typ") == "JWT", f"JWS header {hdr}")
    check(verify_with_openssl(d, token, pki["token_pub"]),
          "signature verifies with the agents' public key (openssl pkeyutl)")
    tampered = token.split(".")
    tampered[1] = base64.urlsafe_b64encode(json.dumps(dict(claims, sub="0" * 8)).encode()
                                           ).decode().rstrip("=")
    check(not verify_with_openssl(d, ".".join(tampered), pki["token_pub"]),
          "a token with altered claims does not verify")
    check(claims["sub"] == nhtest.INSTANCE and claims["project_id"] == nhtest.PROJECT,
          "sub and project_id")
    check(claims["aud"] == "sluice-agent" and claims["iss"] == "sluice-nova-hook", "aud and iss")
    check(claims["exp"] - claims["iat"] == 600, f"exp = iat + 600 ({claims['exp'] - claims['iat']})")
    check(abs(claims["iat"] - t0) < 5 and a["expires"] == claims["exp"], "iat now, expires = exp")
    check(len(claims["jti"]) == 36, "jti is a UUID")
    st, body2, _ = post(port, good, nova_body(nhtest.INSTANCE, nhtest.PROJECT))
    check(json.loads(body2)["token"] != token, "every answer has a fresh token (jti)")

    # --- unknown instance, wrong project
    st, body, _ = post(port, good, nova_body("99999999-9a1c-4e27-8f34-1b2c3d4e5f60",
                                             nhtest.PROJECT))
    check(st == 200 and json.loads(body) == {}, f"unknown instance: 200 {{}} (got {st} {body!r})")
    st, body, _ = post(port, good, nova_body(nhtest.INSTANCE, "0" * 32))
    check(st == 200 and json.loads(body) == {}, "instance of another project: 200 {}")

    # --- authentication
    st, body, _ = post(port, ctx(pki), nova_body(nhtest.INSTANCE, nhtest.PROJECT))
    check(st == 401 and body == b"", f"no client certificate: 401, empty body (got {st} {body!r})")
    try:
        st, body, _ = post(port, ctx(pki, pki["rogue"]), nova_body(nhtest.INSTANCE, nhtest.PROJECT))
        check(st == 403 and body == b"", f"certificate of another CA: 403, empty (got {st})")
    except (ssl.SSLError, ConnectionError) as e:
        check(True, f"certificate of another CA: refused in the handshake ({e.__class__.__name__})")
    st, body, _ = post(port, ctx(pki, pki["nova_other_cn"]),
                       nova_body(nhtest.INSTANCE, nhtest.PROJECT))
    check(st == 403 and body == b"", f"right CA, CN not in client_cn: 403 (got {st})")

    # --- malformed requests
    for what, payload in [("malformed JSON", "{\"instance-id\": "), ("non-object", "[1, 2, 3]"),
                          ("missing instance-id", json.dumps({"project-id": nhtest.PROJECT})),
                          ("non-string instance-id",
                           json.dumps({"instance-id": 5, "project-id": nhtest.PROJECT})),
                          ("empty body", "")]:
        st, body, _ = post(port, good, payload)
        check(st == 400, f"{what}: 400 (got {st} {body[:60]!r})")
    big = json.dumps({"instance-id": nhtest.INSTANCE, "project-id": nhtest.PROJECT,
                      "user-data": "A" * (1100 * 1024)})
    st, body, _ = post(port, good, big)
    check(st == 413, f"1.1 MiB body, over the default max_body: 413 (got {st})")
    try:
        st, body, _ = post(port, good, "A" * (20 * 1024 * 1024))
        check(st == 413, f"20 MiB body: 413 (got {st})")
    except (ConnectionError, ssl.SSLError, http.client.HTTPException) as e:
        check(True, f"20 MiB body: cut off ({e.__class__.__name__})")
    st, _, _ = post(port, good, "", method="GET")
    check(st == 405, f"GET: 405 (got {st})")
    st, _, _ = post(port, good, nova_body(nhtest.INSTANCE, nhtest.PROJECT), path="/other")
    check(st == 404, f"wrong path: 404 (got {st})")
    st, body, _ = post(port, good, nova_body(nhtest.INSTANCE, nhtest.PROJECT))
    check(st == 200 and "token" in json.loads(body), "still serving after the bad requests")


def measure(port, good):
    body = nova_body(nhtest.INSTANCE, nhtest.PROJECT)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=good, timeout=10)
    times = []
    for _ in range(100):
        t = time.perf_counter()
        st, _, _ = post(port, good, body, conn=conn)
        times.append((time.perf_counter() - t) * 1000)
        assert st == 200
    conn.close()
    times.sort()
    med, p99 = statistics.median(times), times[98]
    t = time.perf_counter()
    post(port, good, body)
    fresh = (time.perf_counter() - t) * 1000
    print(f"latency: keep-alive median {med:.2f} ms, p99 {p99:.2f} ms; "
          f"new connection with TLS handshake {fresh:.2f} ms")
    # each answer stores its token's id durably (one commit: the disk's fsync); Nova waits 5 s
    check(p99 < 500 and fresh < 1000, "answers well within Nova's 5 s")


if __name__ == "__main__":
    sys.exit(main())
