#!/usr/bin/env python3
"""Errors a person can act on, at the command line of every program:
  - --version on each; a wrong option gets one line naming it and pointing at --help (exit 2);
  - sluice-agent --check-config catches what would stop the daemon: an unknown backend_user,
    a missing directory for usage_db, a directory the agent cannot make; each error once; a
    trailing '# comment' is a comment;
  - sluice-agent-ca show never writes (a wrong --dir creates no CA);
  - sluice-novahook --check-config catches a missing directory for its database;
  - SQLite's "unable to open database file" comes with the path and what to do.
usage: test_cli.py BUILD_DIR"""
import os
import subprocess
import sys
import tempfile

FAILS = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f"\n     {detail}"))
    if not cond:
        FAILS.append(what)


def run(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def main():
    b = os.path.abspath(sys.argv[1])
    progs = {"sluice-agent": f"{b}/agent/sluice-agent",
             "sluice-agent-ca": f"{b}/agent/sluice-agent-ca",
             "sluice-usage": f"{b}/agent/sluice-usage",
             "sluice-backend": f"{b}/backend/sluice-backend",
             "sluice-novahook": f"{b}/nova-hook/sluice-novahook",
             "sluice-registry": f"{b}/nova-hook/sluice-registry",
             "sluice-enroll": f"{b}/frontend/enroll/sluice-enroll"}
    for name, path in progs.items():
        rc, out, err = run([path, "--version"])
        check(rc == 0 and out.startswith(f"{name} ") and out.count("\n") == 1,
              f"{name} --version", out + err)
        rc, out, err = run([path, "--no-such-flag"])
        check(rc == 2 and err == f"{name}: unknown option --no-such-flag; try '{name} --help'\n"
              and out == "", f"{name}: a wrong option is one line", err)
    rc, out, err = run([progs["sluice-agent"], "--config"])
    check(rc == 2 and err.count("\n") == 1 and "option --config needs a value" in err,
          "a missing value is one line", err)

    with tempfile.TemporaryDirectory(prefix="sluice-cli-") as d:
        pub = f"{d}/token.pub"
        open(pub, "w").write("not checked here\n")
        base = (f"advertise_address = 192.0.2.10  # the host's address\n"
                f"token_public_key = {pub}\nbackend_path = {progs['sluice-backend']}\n"
                f"state_dir = {d}/state\nrun_dir = {d}/run\nca_dir = {d}/ca\n")

        def agent_check(extra):
            conf = f"{d}/agent.conf"
            with open(conf, "w") as f:
                f.write(base + extra)
            return run([progs["sluice-agent"], "--config", conf, "--check-config"])

        rc, out, err = agent_check("backend_user = root\nbackend_group = root\n")
        check(rc == 0 and "configuration OK" in out, "a good configuration (a trailing comment)",
              out + err)
        rc, out, err = agent_check("backend_user = nosuchuser\nbackend_group = root\n"
                                   f"usage_db = {d}/missing/usage.db\n")
        check(rc == 1 and "backend_user nosuchuser: no such user" in err,
              "--check-config: an unknown backend_user", err)
        check(f"usage_db {d}/missing/usage.db: the directory {d}/missing does not exist" in err,
              "--check-config: usage_db's directory missing, said with the path", err)
        check(err.count("nosuchuser") == 1 and err.count("does not exist") == 1,
              "each error once", err)
        rc, out, err = agent_check("backend_user = root\nbackend_group = root\n"
                                   "backend_port_min = 47000x\n")
        check(rc == 1 and err.count("\n") == 1 and ":9: backend_port_min: not an integer" in err,
              "a bad value: one line with FILE:LINE: key", err)
        with open(f"{d}/deep.conf", "w") as f:
            f.write(base.replace(f"{d}/state", f"{d}/no/such/state") +
                    "backend_user = root\nbackend_group = root\n")
        rc, out, err = run([progs["sluice-agent"], "--config", f"{d}/deep.conf",
                            "--check-config"])
        check(rc == 1 and f"state_dir {d}/no/such/state: neither it nor {d}/no/such exists" in err,
              "--check-config: a state_dir the agent cannot make", err)

        # sluice-agent-ca show never writes
        rc, out, err = run([progs["sluice-agent-ca"], "show", "--dir", f"{d}/wrong"])
        check(rc == 1 and not os.path.exists(f"{d}/wrong"),
              "sluice-agent-ca show --dir WRONG: an error, no directory made", err)
        os.makedirs(f"{d}/empty", mode=0o700)
        rc, out, err = run([progs["sluice-agent-ca"], "show", "--dir", f"{d}/empty"])
        check(rc == 1 and os.listdir(f"{d}/empty") == [] and "no CA in this directory" in err,
              "sluice-agent-ca show on an empty directory: no ca.key written", err)
        rc, out, err = run([progs["sluice-agent-ca"], "init", "--dir", f"{d}/empty"])
        rc, out, err = run([progs["sluice-agent-ca"], "show", "--dir", f"{d}/empty"])
        check(rc == 0 and "subject:" in out, "show of an existing CA", err)

        # SQLite: the path and what to do
        rc, out, err = run([progs["sluice-usage"], "--db", f"{d}/nodir/usage.db"])
        check(rc == 1 and f"{d}/nodir/usage.db" in err and "does not exist" in err and
              "unable to open database file" not in err,
              "sluice-usage on a missing database: the path and what to do", err)
        rc, out, err = run([progs["sluice-registry"], "--db", f"{d}/nodir/registry.db", "hosts"])
        check(rc == 1 and "does not exist" in err and "unable to open" not in err,
              "sluice-registry on a missing database: the path and what to do", err)

        # nova-hook's database directory
        pki = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "novahook")
        sys.path.insert(0, pki)
        import nhtest  # noqa: E402
        p = nhtest.make_pki(d)
        conf = nhtest.write_config(d, p, f"{d}/gone/registry.db")
        rc, out, err = run([progs["sluice-novahook"], "--config", conf, "--check-config"])
        check(rc == 1 and f"database {d}/gone/registry.db: the directory {d}/gone does not exist"
              in err and err.count("\n") == 1,
              "sluice-novahook --check-config: database's directory missing, once", err)
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
