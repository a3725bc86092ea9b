"""What the script tests of the binary share (emit_test.py, check_test.py): run `offsim` from
the source root, collect failures, and check a README example against its command; and where the real traces and snapshots are."""

import os
import subprocess
import sys


def real_data(source):
    """The directory of the real Kineto traces (kineto/) and memory snapshots (snapshot/) that the
    repository does not hold (tests/data/kineto/README.md, tests/data/snapshot/README.md):
    $OFFSIM_REAL_DATA, else data/ in the steering repository's shared/ directory, beside the
    checkout SOURCE.  A test that needs a file missing there skips."""
    return os.environ.get("OFFSIM_REAL_DATA") or os.path.normpath(
        os.path.join(os.path.abspath(source), "..", "shared", "data"))


class Checks:
    def __init__(self, offsim, source):
        self.offsim_binary, self.source, self.failures = offsim, source, []

    def check(self, ok, what):
        if not ok:
            self.failures.append(what)
            print("FAIL:", what)

    def offsim(self, *args):
        """The binary's (exit status, stdout, stderr), run from the source root."""
        p = subprocess.run([self.offsim_binary, *args], capture_output=True, text=True, cwd=self.source)
        return p.returncode, p.stdout, p.stderr

    def readme_example(self, readme_text, marker, paths=None):
        """The block after `marker` is what the `./build/cli/offsim ...` line above it prints.
        `paths` maps a path the README names to where the file is (the real data): the command
        runs on the file there, and its output names it as the README does."""
        paths = paths or {}
        shown = readme_text.split(marker + "\n```\n", 1)[1].split("```\n", 1)[0]
        command = readme_text.split(marker, 1)[0].rsplit("./build/cli/offsim ", 1)[1].split("\n", 1)[0]
        status, out, err = self.offsim(*[paths.get(a, a) for a in command.split()])
        for named, real in paths.items():
            out = out.replace(real, named)
        self.check(status == 0 and out == shown, "README's example differs from '%s': %s" % (command, out))

    def finish(self, name, success):
        if self.failures:
            sys.exit("%s: %d failures" % (name, len(self.failures)))
        print("%s: %s" % (name, success))
