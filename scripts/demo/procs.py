"""Processes of the demo: daemons with their log in a file, log waits, commands, clean stops."""
import ctypes
import os
import re
import signal
import socket
import subprocess
import time

PR_SET_PDEATHSIG = 1


class DemoError(Exception):
    """A step failed; the message says what, the demo prints the logs and cleans up."""


def _die_with_parent():
    """preexec_fn: the child gets SIGTERM if the demo dies without cleaning up (SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def daemon_env(extra=None):
    """Our environment without folders holding a libcuda.so.1 (our frontend must never be the
    library a backend loads as its driver), plus extra."""
    env = dict(os.environ)
    keep = [p for p in env.get("LD_LIBRARY_PATH", "").split(":")
            if p and not os.path.exists(os.path.join(p, "libcuda.so.1"))]
    env["LD_LIBRARY_PATH"] = ":".join(keep)
    env.update(extra or {})
    return env


LINE = re.compile(r"^<(\d)>")


def clean(line):
    """A log line without its journald priority prefix."""
    return LINE.sub("", line.rstrip("\n"))


class Daemon:
    """A background process; stdout and stderr go to LOG. wait_for() reads the log."""

    def __init__(self, name, argv, log, env=None):
        self.name, self.argv, self.log = name, argv, log
        self.logf = open(log, "w")
        self.proc = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env or daemon_env(),
                                     start_new_session=True, preexec_fn=_die_with_parent)
        self.seen = 0  # log offset up to which show_new() printed

    def text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def wait_for(self, pattern, timeout, what=None):
        """The first match of pattern in the log; DemoError after timeout or if it exits."""
        rx = re.compile(pattern, re.M)
        end = time.time() + timeout
        while True:
            m = rx.search(self.text())
            if m:
                return m
            if self.proc.poll() is not None:
                raise DemoError(f"{self.name} exited ({self.proc.returncode}) while waiting "
                                f"for {what or pattern!r}")
            if time.time() > end:
                raise DemoError(f"{self.name}: no {what or pattern!r} after {timeout:.0f} s")
            time.sleep(0.05)

    def show_new(self, pattern=None, prefix="    | "):
        """Prints the log lines written since the last call (those matching pattern)."""
        text = self.text()
        new, self.seen = text[self.seen:], len(text)
        for line in new.splitlines():
            if pattern is None or re.search(pattern, line):
                print(prefix + clean(line))

    def stop(self, timeout=15):
        """SIGTERM, then SIGKILL to the whole process group; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        try:  # anything it left behind (a backend it forked) goes with it
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        rc = self.proc.wait()
        self.logf.close()
        return rc


def run(argv, env=None, timeout=60, check=True, show=True, prefix="    "):
    """Runs a command, prints '$ command' and its output; returns (rc, output)."""
    if show:
        print(f"  $ {' '.join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv))}")
    try:
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout,
                           stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    except subprocess.TimeoutExpired:
        raise DemoError(f"{argv[0]}: no answer after {timeout} s")
    out = (r.stdout + r.stderr).rstrip()
    if show and out:
        print("\n".join(prefix + clean(line) for line in out.splitlines()))
    if check and r.returncode != 0:
        raise DemoError(f"{os.path.basename(argv[0])} failed (exit status {r.returncode})")
    return r.returncode, out
