#!/usr/bin/env python3
"""Logs a person and journald can trust (issue 19.5, docs/operator-guide.md "Logs"):

  forgery   a guest whose host name holds a newline and "<0>agent: FORGED ..." runs vector_add
            through a sluice-backend (the program runs in a UTS namespace of its own with that
            host name); the backend logs the name it sent, and the log must not hold a line
            of its own made by the guest: no line starts with "<0>", the name is there escaped.
  journald  the same run with the backend's stderr connected to a real systemd-journald (a
            journal namespace, started here, bound over /run/systemd/journal in a private mount
            namespace as systemd's LogNamespace= does): every entry the backend logs carries
            SYSLOG_IDENTIFIER=sluice-backend and SLUICE_PROJECT, the session's entries
            SLUICE_INSTANCE and SLUICE_SESSION (PROJECT8/N); no entry has priority 0..2 and no
            MESSAGE holds a line feed.

Runs as root (namespaces, journald). Exit 0 passed, 1 failed, 77 skipped (the CUDA programs or
systemd-journald are not there).
usage: logs.py --build BUILD [--part forgery|journald]"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402

HOSTILE = "evil\n<0>agent: FORGED emergency\r"
ESCAPED = "evil\\n<0>agent: FORGED emergency\\r"
JOURNALD = "/lib/systemd/systemd-journald"


class Args:
    backend_arg = []
    double_mem_mib = 0


def guest(ctx, backend, out):
    """vector_add through the frontend, in a UTS namespace with the hostile host name."""
    env = dict(os.environ)
    env["SLUICE_CONFIG_DIR"] = backend.conf
    env["LD_LIBRARY_PATH"] = ":".join(
        p for p in [ctx.frontend_dir, os.path.join(ctx.cuda_root, "lib64"),
                    env.get("LD_LIBRARY_PATH", "")] if p)
    if ctx.asan:
        env["LD_PRELOAD"] = ctx.asan
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    code = ("import os, socket, sys; socket.sethostname(sys.argv[1].encode()); "
            "os.execv(sys.argv[2], sys.argv[2:])")
    r = subprocess.run(["unshare", "--uts", sys.executable, "-c", code, HOSTILE, ctx.program],
                       env=env, capture_output=True, text=True, timeout=120)
    out.append(r.stdout + r.stderr)
    return r.returncode


def start_backend(ctx, work, stderr=None, env=None):
    args = Args()
    args.backend = ctx.backend
    b = run.Backend(args, ctx.pki, work, ctx.driver, env_extra=env)
    if stderr is not None:  # replace the log file by the journal's stream
        run.kill_group(b.proc)
        b.logf.close()
        penv = dict(os.environ, **(env or {}))
        b.proc = subprocess.Popen(b.argv, stdout=stderr, stderr=stderr, env=penv,
                                  stdin=subprocess.DEVNULL, start_new_session=True,
                                  preexec_fn=run.die_with_parent)
        b.logf = open(os.devnull, "w")
    why = b.wait_ready()
    if why:
        raise RuntimeError(why)
    return b


def part_forgery(ctx, work):
    problems = []
    b = start_backend(ctx, work, env={"SLUICE_LOG_LEVEL": "info"})
    out = []
    try:
        rc = guest(ctx, b, out)
    finally:
        b.stop()
    with open(b.log, errors="replace") as f:
        log = f.read()
    if rc != 0:
        problems.append(f"vector_add failed (rc {rc}): {out[0][-600:]}")
    if ESCAPED not in log:
        problems.append("the backend's log does not show the guest's host name, escaped")
    bad = [ln for ln in log.splitlines() if ln.startswith(("<0>", "<1>", "<2>", "agent:"))]
    if bad or "\nagent: FORGED" in log or "\n<0>agent" in log:
        problems.append(f"a line made by the guest: {bad}")
    print(f"  the host name in the backend's log: ...{ESCAPED}...: "
          f"{'escaped, on its own line' if not problems else 'NOT SAFE'}")
    return problems


def journal_child(ctx, work, ns):
    """In a private mount namespace: the namespace's sockets at /run/systemd/journal, the
    backend's stderr connected to the journal's stream socket (systemd's protocol)."""
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run/systemd"], check=True)
    os.makedirs("/run/systemd/journal")
    subprocess.run(["mount", "--bind", f"{work}/ns-sockets", "/run/systemd/journal"], check=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/run/systemd/journal/stdout")
    s.sendall(b"sluice-agent\n\n6\n1\n0\n0\n0\n")  # as systemd connects a unit's stderr
    st = os.fstat(s.fileno())
    env = {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}", "SLUICE_LOG_LEVEL": "info"}
    b = start_backend(ctx, work, stderr=s.fileno(), env=env)
    out = []
    try:
        rc = guest(ctx, b, out)
    finally:
        b.stop()
        s.close()
    return rc


def part_journald(ctx, work):
    if not os.path.exists(JOURNALD):
        print(f"  SKIP: {JOURNALD} not installed")
        return None
    ns = f"sluicetest{os.getpid()}"
    jd = subprocess.Popen([JOURNALD, ns], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          preexec_fn=run.die_with_parent)
    problems = []
    try:
        sockets = f"/run/systemd/journal.{ns}"
        for _ in range(100):
            if os.path.exists(f"{sockets}/stdout") and os.path.exists(f"{sockets}/socket"):
                break
            time.sleep(0.1)
        else:
            return [f"systemd-journald {ns} did not make its sockets"]
        os.makedirs(f"{work}/ns-sockets")
        subprocess.run(["mount", "--bind", sockets, f"{work}/ns-sockets"], check=True)
        try:
            r = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable,
                                __file__, "--journal-child", ns, "--work", work, "--pki",
                                ctx.pki, "--build", ctx.build],
                               capture_output=True, text=True, timeout=180)
        finally:
            subprocess.run(["umount", f"{work}/ns-sockets"])
        if r.returncode != 0:
            problems.append(f"the run under journald failed: {(r.stdout + r.stderr)[-1500:]}")
        time.sleep(1)
        j = subprocess.run(["journalctl", f"--namespace={ns}", "-o", "json", "--no-pager"],
                           capture_output=True, text=True, timeout=60)
        entries = [json.loads(line) for line in j.stdout.splitlines() if line.strip()]
        problems += check_journal(entries)
    finally:
        jd.terminate()
        jd.wait(10)
        subprocess.run(["rm", "-rf", f"/run/systemd/journal.{ns}"])
        for d in subprocess.run(["sh", "-c", f"ls -d /var/log/journal/*.{ns} "
                                 f"/run/log/journal/*.{ns} 2>/dev/null"],
                                capture_output=True, text=True).stdout.split():
            shutil.rmtree(d, ignore_errors=True)
    return problems


def check_journal(entries):
    problems = []
    ours = [e for e in entries if e.get("SYSLOG_IDENTIFIER") == "sluice-backend"]
    if not ours:
        return [f"no entry with SYSLOG_IDENTIFIER=sluice-backend among {len(entries)}: "
                f"{[e.get('MESSAGE') for e in entries][-10:]}"]
    stream = [e for e in entries if e.get("_TRANSPORT") == "stdout"
              and str(e.get("MESSAGE", "")).startswith("sluice-backend:")]
    if stream:
        problems.append(f"backend lines came through the stream, under the unit's identifier: "
                        f"{[e['MESSAGE'] for e in stream][:3]}")
    no_project = [e["MESSAGE"] for e in ours if e.get("SLUICE_PROJECT") != run.PROJECT]
    if no_project:
        problems.append(f"{len(no_project)} backend entries without SLUICE_PROJECT: "
                        f"{no_project[:3]}")
    sessions = [e for e in ours if "SLUICE_SESSION" in e]
    label = f"{run.PROJECT[:8]}/"
    if not sessions or not all(e["SLUICE_SESSION"].startswith(label) and
                               e.get("SLUICE_INSTANCE") == run.GUEST_UUID for e in sessions):
        problems.append(f"session entries without SLUICE_SESSION {label}N and SLUICE_INSTANCE: "
                        f"{[(e.get('SLUICE_SESSION'), e.get('MESSAGE')) for e in ours][:5]}")
    urgent = [e["MESSAGE"] for e in entries if str(e.get("PRIORITY")) in ("0", "1", "2")]
    if urgent:
        problems.append(f"entries of priority 0..2 (forged?): {urgent}")
    multi = [e["MESSAGE"] for e in entries if isinstance(e.get("MESSAGE"), str)
             and "\n" in e["MESSAGE"]]
    if multi or not any(ESCAPED in str(e.get("MESSAGE")) for e in ours):
        problems.append(f"the host name is not one escaped line: {multi[:2]}")
    print(f"  {len(ours)} entries of sluice-backend, all with SLUICE_PROJECT; "
          f"{len(sessions)} with SLUICE_SESSION {sessions[0]['SLUICE_SESSION'] if sessions else '-'}"
          f"; none of priority 0..2")
    return problems


class Ctx:
    pass


def context(build):
    ctx = Ctx()
    ctx.build = os.path.abspath(build)
    ctx.backend = os.path.join(ctx.build, "backend", "sluice-backend")
    ctx.driver = os.path.join(ctx.build, "tests", "double", "libsluice-driver-double.so")
    ctx.program = os.path.join(ctx.build, "tests", "cuda", "vector_add.static")
    lib = run.find_first([os.path.join(ctx.build, "frontend", "libcuda.so.1"),
                          os.path.join(ctx.build, "frontend", "**", "libcuda.so.1")])
    ctx.frontend_dir = os.path.dirname(lib) if lib else None
    ctx.cuda_root = os.environ.get("SLUICE_CUDA_ROOT", "/usr/local/cuda")
    ctx.asan = run.asan_runtime(lib) if lib else None
    return ctx


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--part", action="append", choices=["forgery", "journald"])
    ap.add_argument("--journal-child", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--pki", help=argparse.SUPPRESS)
    args = ap.parse_args()
    ctx = context(args.build)
    if args.journal_child:
        ctx.pki = args.pki
        return 0 if journal_child(ctx, args.work, args.journal_child) == 0 else 1
    for what, path in [("sluice-backend", ctx.backend), ("driver double", ctx.driver),
                       ("vector_add", ctx.program), ("frontend", ctx.frontend_dir)]:
        if not path or not os.path.exists(path):
            print(f"SKIP: no {what} ({path})")
            return run.SKIP
    work = tempfile.mkdtemp(prefix="sluice-logs-")
    ctx.pki = os.path.join(work, "pki")
    failed = skipped = 0
    try:
        subprocess.run([os.path.join(run.REPO, "scripts", "make-demo-pki"), ctx.pki], check=True,
                       stdout=subprocess.DEVNULL)
        for part in args.part or ["forgery", "journald"]:
            print(f"---- {part}")
            t0 = time.time()
            sub = os.path.join(work, part)
            os.makedirs(sub)
            problems = {"forgery": part_forgery, "journald": part_journald}[part](ctx, sub)
            if problems is None:
                skipped += 1
                continue
            for p in problems:
                print(f"FAIL: {p}")
            failed += bool(problems)
            print(f"{'FAIL' if problems else 'PASS'} e2e.logs.{part} {time.time() - t0:.1f}s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failed:
        return 1
    return run.SKIP if skipped and not args.part else 0


if __name__ == "__main__":
    sys.exit(main())
