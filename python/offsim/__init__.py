"""offsim in Python: the `offsim` commands as functions that return pandas DataFrames.

Every function runs the command line's own code in this process (liboffsim.so, cli/api.h):
``offsim.compare(s)`` is ``offsim compare s --format csv`` with its report parsed, so the
figures, the messages and the exit classes are the CLI's by construction.  The CSV or JSON
text the command printed stays on the result, ``df.attrs["csv"]`` (``["json"]`` for a plan),
byte for byte what the CLI prints.

A scenario is a path (str or os.PathLike; a str holding a line break is read as scenario
text), scenario text, or a dict of groups such as
``{"transformer": {"hidden": 4096}, "policy.async": {"kind": "offload"}}``.  Text and
dicts reach the command as ``-`` (stdin), named ``(stdin)`` in messages, their includes
resolved against the current directory.  A command that fails raises :class:`Error` with the
line the CLI prints after ``offsim:`` and its exit status.
"""

import csv
import io
import json
import os
import threading

import cffi
import pandas as pd

__all__ = ["Error", "run", "compare", "plan", "emit", "sweep", "model", "check", "main", "scenario_text"]

_ffi = cffi.FFI()
# cli/api.h, as cffi reads it.
_ffi.cdef(
    """
    typedef int (*CliApiWrite)(const char *text, size_t length, void *data);
    int cli_api_main(int argc, const char *const *argv, const char *input, CliApiWrite write, void *data,
                     char **message);
    void cli_api_free(void *pointer);
    """
)


def _library_path():
    """OFFSIM_LIBRARY, else the liboffsim.so beside this file (the build tree's or pip's copy)."""
    return os.environ.get("OFFSIM_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "liboffsim.so")


_lib = _ffi.dlopen(_library_path())
# The commands' stdout and failure line are process state (cli/api.h): one call at a time.
_lock = threading.Lock()


class Error(Exception):
    """A command failed: ``str(e)`` is the line the CLI prints after ``offsim: ``,
    ``e.exit_status`` its exit status (1 internal, 2 bad input, 3 a missing tool)."""

    def __init__(self, message, exit_status):
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status


def main(args, input=None, on_output=None):
    """Runs ``offsim ARGS...`` in this process; returns (exit status, stdout text, failure line or None).

    `input` is what a scenario ``-`` reads.  `on_output(text)` gets the report as it is written
    (a sweep's rows as they finish).  Nothing is raised for a nonzero status: see :func:`call`.
    """
    argv = [_ffi.new("char[]", b"offsim")] + [_ffi.new("char[]", os.fsencode(a)) for a in args]
    argv_c = _ffi.new("const char *[]", argv)
    chunks = []
    failure = []

    def write(text, length, data):
        try:
            chunk = _ffi.unpack(text, length).decode("utf-8")
            chunks.append(chunk)
            if on_output is not None:
                on_output(chunk)
            return 1
        except BaseException as e:  # the command fails as on a closed stdout; raised below
            failure.append(e)
            return 0

    callback = _ffi.callback("CliApiWrite", write)
    message = _ffi.new("char **")
    input_c = _ffi.new("char[]", input.encode("utf-8")) if input is not None else _ffi.NULL
    with _lock:
        status = _lib.cli_api_main(len(argv), argv_c, input_c, callback, _ffi.NULL, message)
    line = None
    if message[0] != _ffi.NULL:
        line = _ffi.string(message[0]).decode("utf-8")
        _lib.cli_api_free(message[0])
    if failure:
        raise failure[0]
    return status, "".join(chunks), line


def call(args, input=None, on_output=None, ok=(0,)):
    """:func:`main`, raising :class:`Error` for an exit status not in `ok`; returns (status, stdout)."""
    status, out, line = main(args, input, on_output)
    if status not in ok:
        raise Error(line or "exit status %d" % status, status)
    return status, out


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def scenario_text(groups):
    """A dict of groups ({"group": {"key": value}}) as scenario text; bools are true/false."""
    lines = []
    for group, keys in groups.items():
        lines.append("[%s]" % group)
        lines.extend("%s = %s" % (k, _value(v)) for k, v in keys.items())
        lines.append("")
    return "\n".join(lines)


def _scenario(scenario):
    """(the command's SCENARIO argument, the text it reads on stdin or None)."""
    if isinstance(scenario, dict):
        return "-", scenario_text(scenario)
    if isinstance(scenario, os.PathLike):
        return os.fspath(scenario), None
    if isinstance(scenario, str) and "\n" in scenario:
        return "-", scenario
    if isinstance(scenario, str):
        return scenario, None
    raise TypeError("scenario: expected a path, scenario text or a dict of groups, got %r" % type(scenario).__name__)


def _scenario_args(scenario):
    if scenario is None:
        return [], None
    arg, text = _scenario(scenario)
    return [arg], text


def _csv_frame(text):
    df = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    df.attrs["csv"] = text
    return df


def _budget(budget):
    return [] if budget is None else ["--budget", str(budget)]


def run(scenario=None, policy=None, budget=None):
    """``offsim run SCENARIO --format csv``: one row (without a scenario, the embedded default)."""
    args, text = _scenario_args(scenario)
    args += ["--format", "csv"] + ([] if policy is None else ["--policy", policy]) + _budget(budget)
    return _csv_frame(call(["run"] + args, text)[1])


def compare(scenario=None, budget=None):
    """``offsim compare SCENARIO --format csv``: one row per policy (and "planned" with a budget)."""
    args, text = _scenario_args(scenario)
    return _csv_frame(call(["compare"] + args + ["--format", "csv"] + _budget(budget), text)[1])


def plan(scenario, budget, framework=None):
    """``offsim plan SCENARIO --budget SIZE --format json``: the plan's layers, one row each.

    With `framework` (megatron, torchtune, verl, te, deepspeed, torchtitan) only the plans that
    framework's configuration can express, ``attrs["plan"]["framework"]`` saying what that
    restriction costs; save_on_cpu: any per-layer plan with its copy schedule.

    The columns are the JSON's per-layer fields (index, action, ...); ``attrs["plan"]`` is the
    whole JSON object (verdict, the policy block, actions, stages), ``attrs["json"]`` its text,
    ``attrs["feasible"]`` whether a plan fits (the CLI's exit 4 when none does: not an error,
    the rows then show the smallest peak found).
    """
    arg, text = _scenario(scenario)
    args = ["plan", arg, "--format", "json"] + _budget(budget)
    if framework is not None:
        args += ["--framework", framework]
    status, out = call(args, text, ok=(0, 4))
    obj = json.loads(out)
    df = pd.DataFrame(obj.get("layers", []))
    df.attrs["plan"] = obj
    df.attrs["json"] = out
    df.attrs["feasible"] = status == 0
    return df


def emit(scenario, budget, framework, restrict=True):
    """``offsim plan SCENARIO --budget SIZE --framework NAME --emit NAME``: the plan as the
    framework's own configuration (text).  Without `restrict`, ``--emit NAME`` alone: the
    per-layer plan, or :class:`Error` (exit 2) when the framework cannot express it."""
    arg, text = _scenario(scenario)
    args = ["plan", arg] + _budget(budget) + (["--framework", framework] if restrict else []) + ["--emit", framework]
    return call(args, text)[1]


def sweep(scenario, set, jobs=None, keep_going=True, on_row=None):
    """``offsim sweep SCENARIO --set K=V1,V2... --keep-going``: one row per point and policy.

    `set` maps "group.key" to its values (a list, or the CLI's "v1,v2" text).  With
    `keep_going` (the default) a point whose combination is invalid is a row whose `error`
    column says why, and the sweep goes on; without it the first such point raises.
    `on_row(dict)` gets each row as it is written, in grid order, while the sweep runs.
    """
    arg, text = _scenario(scenario)
    args = ["sweep", arg]
    for key, values in set.items():
        values = values if isinstance(values, str) else ",".join(_value(v) for v in values)
        args += ["--set", "%s=%s" % (key, values)]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    if keep_going:
        args.append("--keep-going")
    rows = _RowStream(on_row)
    out = call(args, text, on_output=rows.feed)[1]
    return _csv_frame(out)


class _RowStream:
    """Cuts the streamed CSV into records for on_row: the header first, then one dict a row.
    A record ends at a line break outside quotes (RFC 4180: a quoted field may hold one)."""

    def __init__(self, on_row):
        self.on_row = on_row
        self.pending = ""
        self.scanned = 0  # of pending, with the quote state there
        self.quoted = False
        self.header = None

    def feed(self, chunk):
        if self.on_row is None:
            return
        self.pending += chunk
        start = 0
        for i in range(self.scanned, len(self.pending)):
            c = self.pending[i]
            if c == '"':
                self.quoted = not self.quoted
            elif c == "\n" and not self.quoted:
                self._record(self.pending[start:i])
                start = i + 1
        self.pending = self.pending[start:]
        self.scanned = len(self.pending)

    def _record(self, line):
        fields = next(csv.reader([line]))
        if self.header is None:
            self.header = fields
        else:
            self.on_row(dict(zip(self.header, fields)))


def check(trace=None, scenario=None, policy=None, snapshot=None, write_profile=None):
    """``offsim check [SCENARIO] [--trace FILE] [--snapshot FILE] [--write-profile FILE] --format csv``:
    what a real step measured, one row each, beside the prediction for `scenario` (its first
    policy, or `policy`); columns quantity, measured, predicted.

    `trace` is a torch.profiler (Kineto) trace (figures per step when it has ProfilerSteps, and
    each layer's forward and backward kernel time where it has nn.Module layer ranges);
    `snapshot` a torch.cuda.memory._dump_snapshot pickle (peak allocated and reserved, and the
    memory by record_function range); at least one of them.  `write_profile` (with `trace`) is
    the path the device profile derived from the trace's kernels and copies is written to.
    """
    args, text = _scenario_args(scenario)
    for option, value in (("--trace", trace), ("--snapshot", snapshot), ("--write-profile", write_profile)):
        if value is not None:
            args += [option, os.fspath(value)]
    args += ["--format", "csv"] + ([] if policy is None else ["--policy", policy])
    return _csv_frame(call(["check"] + args, text)[1])


def model(hf_config, batch=None, seq=None, **options):
    """``offsim model --hf-config FILE ...``: the scenario text it prints (run/compare take it).

    Other options by their CLI names, dashes as underscores: dtype, ops, attention, optimizer,
    profile, name.
    """
    args = ["model", "--hf-config", os.fspath(hf_config)]
    if batch is not None:
        args += ["--batch", str(batch)]
    if seq is not None:
        args += ["--seq", str(seq)]
    for key, value in options.items():
        args += ["--" + key.replace("_", "-"), _value(value)]
    return call(args)[1]
