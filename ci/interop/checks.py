"""Shared by the Python drivers: named checks that print PASS or FAIL with what mismatched."""

import sys
import time
import traceback


class Checks:
    """Runs named checks; a failed or raising check prints FAIL and the run exits 1 at the end."""

    def __init__(self, client):
        self.client = client
        self.failed = []

    def run(self, name, fn, *args):
        """Runs `fn(*args)`; it returns a detail string on success and raises on a mismatch."""
        start = time.monotonic()
        try:
            detail = fn(*args)
        except Mismatch as e:
            self.failed.append(name)
            print(f"{self.client}: FAIL: {name}: {e}", flush=True)
            return False
        except Exception as e:  # a client error is a failure of the check, with its cause
            self.failed.append(name)
            print(f"{self.client}: FAIL: {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(limit=4, file=sys.stdout)
            return False
        took = time.monotonic() - start
        print(f"{self.client}: PASS: {name}" + (f" ({detail})" if detail else "") + f" [{took:.1f}s]",
              flush=True)
        return True

    def finish(self):
        if self.failed:
            print(f"{self.client}: FAIL ({len(self.failed)} failed: {'; '.join(self.failed)})", flush=True)
            sys.exit(1)
        print(f"{self.client}: PASS", flush=True)


class Mismatch(Exception):
    """What a client got back differs from what was expected."""


def expect(condition, message):
    if not condition:
        raise Mismatch(message)


def until(deadline_s, what, step):
    """Calls `step()` until it returns a true value or `deadline_s` seconds pass."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        result = step()
        if result:
            return result
    raise Mismatch(f"timed out after {deadline_s}s waiting for {what}")
