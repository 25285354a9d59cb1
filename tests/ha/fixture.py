#!/usr/bin/env python3
"""The `mariadb` ctest fixture: one MariaDB server (tests/ha/mariadb.py) for every .mariadb
test of a run, started before the first and stopped after the last.
usage: fixture.py start|stop STATE_DIR"""
import os
import sys

import mariadb


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        print(__doc__, file=sys.stderr)
        return 2
    action, state = sys.argv[1:]
    if os.path.exists(f"{state}/state.json"):  # left over by an interrupted run
        mariadb.Server.load(state).stop()
        os.unlink(f"{state}/state.json")
    if action == "start":
        server = mariadb.Server.start(state)
        print(f"mariadb on 127.0.0.1:{server.state['port']} (TLS), data in "
              f"{server.state['root']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
