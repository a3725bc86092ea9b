"""What the script tests of the binary share (emit_test.py, check_test.py): run `offsim` from
the source root, collect failures, and check a README example against its command."""

import subprocess
import sys


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

    def readme_example(self, readme_text, marker):
        """The block after `marker` is what the `./build/cli/offsim ...` line above it prints."""
        shown = readme_text.split(marker + "\n```\n", 1)[1].split("```\n", 1)[0]
        command = readme_text.split(marker, 1)[0].rsplit("./build/cli/offsim ", 1)[1].split("\n", 1)[0]
        status, out, err = self.offsim(*command.split())
        self.check(status == 0 and out == shown, "README's example differs from '%s': %s" % (command, out))

    def finish(self, name, success):
        if self.failures:
            sys.exit("%s: %d failures" % (name, len(self.failures)))
        print("%s: %s" % (name, success))
