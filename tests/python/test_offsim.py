"""The Python package (python/offsim) against the `offsim` executable: every function's text is
the CLI's stdout byte for byte, its DataFrame is that text parsed, and its errors are the CLI's
stderr line and exit status.  Nothing here is a recorded output: each expectation is the
binary's answer to the same question.

Run by ctest (tests/CMakeLists.txt: python_package) with PYTHONPATH=build/python:tests,
OFFSIM_BINARY and OFFSIM_SOURCE set.
"""

import glob
import io
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

import offsim

BINARY = os.environ["OFFSIM_BINARY"]
SOURCE = os.environ["OFFSIM_SOURCE"]
SCENARIOS = os.path.join(SOURCE, "scenarios")
BUNDLED = sorted(glob.glob(os.path.join(SCENARIOS, "*.ini")))
from clitest import real_data  # noqa: E402  (tests/, on PYTHONPATH: where the real traces and snapshots are)


def real_file(relative):
    """A real trace or snapshot (kineto/NAME, snapshot/NAME), not in the repository
    (tests/data/kineto/README.md, tests/data/snapshot/README.md); the test skips without it."""
    path = os.path.join(real_data(SOURCE), relative)
    if not os.path.isfile(path):
        pytest.skip("%s absent (the real data: $OFFSIM_REAL_DATA, else shared/data beside the checkout)" % path)
    return path


def cli(*args, input=None, cwd=None):
    """The executable's (exit status, stdout, stderr)."""
    p = subprocess.run([BINARY, *args], input=input, capture_output=True, text=True, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def cli_ok(*args, **kw):
    status, out, err = cli(*args, **kw)
    assert status == 0, err
    return out


def assert_same_error(excinfo, *args, **kw):
    """The exception is the CLI's failure: its line after "offsim: " and its exit status."""
    status, out, err = cli(*args, **kw)
    assert status != 0
    assert err == "offsim: %s\n" % excinfo.value
    assert excinfo.value.exit_status == status


def assert_frame_is(df, text):
    """`df` carries the CLI's text and is that text as pandas reads it."""
    assert df.attrs["csv"] == text
    expected = pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])
    pd.testing.assert_frame_equal(df, expected)
    assert list(df.columns) == text.split("\n", 1)[0].split(",")


@pytest.fixture
def in_scenarios(monkeypatch):
    """Scenario text resolves its includes against the current directory, as `offsim run -`."""
    monkeypatch.chdir(SCENARIOS)


def test_run_default_is_the_cli():
    assert_frame_is(offsim.run(), cli_ok("run", "--format", "csv"))


@pytest.mark.parametrize("path", BUNDLED, ids=os.path.basename)
def test_compare_every_bundled_scenario_is_the_cli(path):
    assert_frame_is(offsim.compare(path), cli_ok("compare", path, "--format", "csv"))


def test_run_policy_and_budget_are_the_cli():
    path = os.path.join(SCENARIOS, "llama-3.1-8b.ini")
    df = offsim.run(path, policy="offload-async", budget="60GiB")
    assert_frame_is(df, cli_ok("run", path, "--policy", "offload-async", "--budget", "60GiB", "--format", "csv"))
    assert list(df.policy) == ["offload-async"]


def test_compare_with_budget_adds_the_planned_row_as_the_cli():
    path = os.path.join(SCENARIOS, "llama-3.1-8b.ini")
    df = offsim.compare(path, budget="60GiB")
    assert_frame_is(df, cli_ok("compare", path, "--budget", "60GiB", "--format", "csv"))
    assert df.policy.iloc[-1] == "planned"


def test_scenario_text_is_the_cli_reading_stdin(in_scenarios):
    text = open("llama-3.1-8b.ini").read()
    df = offsim.compare(text)
    assert_frame_is(df, cli_ok("compare", "-", "--format", "csv", input=text))
    # ...which is the file's own result: only where the scenario came from differs.
    assert df.attrs["csv"] == cli_ok("compare", "llama-3.1-8b.ini", "--format", "csv")


def test_dict_of_groups_is_its_text(in_scenarios):
    groups = {
        "scenario": {"name": "dict", "include": "profiles/h100-sxm-pcie-gen5.ini"},
        "transformer": {"layers": 4, "hidden": 1024, "heads": 8, "ffn": 4096, "vocab": 32000, "seq": 1024, "batch": 2},
        "policy.async": {"kind": "offload", "mode": "async"},
        "policy.ckpt": {"kind": "checkpoint"},
    }
    text = offsim.scenario_text(groups)
    assert "[policy.async]\nkind = offload\nmode = async\n" in text
    df = offsim.compare(groups)
    assert_frame_is(df, cli_ok("compare", "-", "--format", "csv", input=text))
    assert list(df.policy) == ["async", "ckpt"]


def test_plan_is_the_cli_json_and_its_layers():
    path = os.path.join(SCENARIOS, "llama-3.1-8b.ini")
    df = offsim.plan(path, budget="60GiB")
    out = cli_ok("plan", path, "--budget", "60GiB", "--format", "json")
    assert df.attrs["json"] == out
    plan = df.attrs["plan"]
    assert df.attrs["feasible"] and plan["feasible"]
    assert df.to_dict("records") == plan["layers"]
    assert "action" in df.columns and len(df) == len(plan["layers"]) > 0


def test_plan_that_nothing_fits_is_exit_4_not_an_error():
    path = os.path.join(SCENARIOS, "llama-3.1-8b.ini")
    status, out, err = cli("plan", path, "--budget", "1GiB", "--format", "json")
    assert status == 4
    df = offsim.plan(path, budget="1GiB")
    assert df.attrs["json"] == out and not df.attrs["feasible"]


def test_framework_plan_and_emit_are_the_cli():
    path = os.path.join(SCENARIOS, "llama-3.1-8b.ini")
    df = offsim.plan(path, budget="60GiB", framework="megatron")
    assert df.attrs["json"] == cli_ok("plan", path, "--budget", "60GiB", "--framework", "megatron", "--format", "json")
    assert df.attrs["plan"]["framework"]["name"] == "megatron"
    text = offsim.emit(path, "60GiB", "torchtitan")
    assert text == cli_ok("plan", path, "--budget", "60GiB", "--framework", "torchtitan", "--emit", "torchtitan")
    with pytest.raises(offsim.Error) as e:
        offsim.emit(path, "60GiB", "te", restrict=False)
    assert_same_error(e, "plan", path, "--budget", "60GiB", "--emit", "te")


def test_check_is_the_cli():
    trace = real_file("kineto/sampled_rank-0.json.gz")
    path = os.path.join(SCENARIOS, "llama-3.1-8b.ini")
    df = offsim.check(trace, path, policy="offload-async")
    assert_frame_is(df, cli_ok("check", path, "--trace", trace, "--policy", "offload-async", "--format", "csv"))
    assert list(df.columns) == ["quantity", "measured", "predicted"]


def test_check_write_profile_is_the_cli(tmp_path):
    trace = real_file("kineto/sampled_rank-0.json.gz")
    df = offsim.check(trace, write_profile=tmp_path / "a.ini")
    assert_frame_is(df, cli_ok("check", "--trace", trace, "--write-profile", str(tmp_path / "b.ini"), "--format", "csv"))
    assert (tmp_path / "a.ini").read_text() == (tmp_path / "b.ini").read_text()
    assert "[device]" in (tmp_path / "a.ini").read_text()


def test_check_snapshot_is_the_cli():
    snapshot = real_file("snapshot/decomfl_training.pickle.gz")
    path = os.path.join(SCENARIOS, "tiny.ini")
    df = offsim.check(snapshot=snapshot, scenario=path)
    assert_frame_is(df, cli_ok("check", path, "--snapshot", snapshot, "--format", "csv"))
    assert df.quantity[0] == "peak_allocated_bytes"


def test_check_errors_are_the_cli():
    """Refused before any file is read: no real file needed (the snapshot's path is only named)."""
    snapshot = os.path.join(real_data(SOURCE), "snapshot", "decomfl_training.pickle.gz")
    readme = os.path.join(SOURCE, "README.md")
    for kwargs, args in (({}, []), ({"snapshot": readme}, ["--snapshot", readme]),
                         ({"snapshot": snapshot, "write_profile": "p.ini"}, ["--snapshot", snapshot, "--write-profile", "p.ini"])):
        with pytest.raises(offsim.Error) as e:
            offsim.check(**kwargs)
        assert_same_error(e, "check", *args)


SWEEP = {"transformer.heads": [14, 12], "transformer.kv_heads": [2, 7]}
SWEEP_ARGS = ["--set", "transformer.heads=14,12", "--set", "transformer.kv_heads=2,7"]


def test_sweep_keeps_going_as_the_cli_and_streams_its_rows():
    path = os.path.join(SCENARIOS, "default.ini")
    rows = []
    df = offsim.sweep(path, SWEEP, jobs=2, on_row=rows.append)
    status, out, err = cli("sweep", path, *SWEEP_ARGS, "--jobs", "2", "--keep-going")
    assert status == 0 and "1 of 4 points failed" in err
    assert_frame_is(df, out)
    assert df.columns[-1] == "error"
    failed = df[df.error.notna()]
    # heads 12 with kv_heads 7: one row, the message exit 2 gives without --keep-going.
    assert list(failed["transformer.heads"]) == [12] and list(failed["transformer.kv_heads"]) == [7]
    plain_status, _, plain_err = cli("sweep", path, *SWEEP_ARGS, "--jobs", "2")
    assert plain_status == 2 and plain_err == "offsim: %s\n" % failed.error.iloc[0]
    assert failed.policy.isna().all() and failed.step_ms.isna().all()
    # The rows came one by one, in the CSV's order, as text.
    as_text = pd.read_csv(io.StringIO(out), dtype=str, keep_default_na=False)
    assert rows == as_text.to_dict("records")


def test_sweep_without_keep_going_is_the_cli():
    path = os.path.join(SCENARIOS, "default.ini")
    sets = {"link.h2d_bandwidth": ["25GB/s", "55GB/s"], "transformer.batch": "1,2"}
    df = offsim.sweep(path, sets, keep_going=False)
    out = cli_ok("sweep", path, "--set", "link.h2d_bandwidth=25GB/s,55GB/s", "--set", "transformer.batch=1,2")
    assert_frame_is(df, out)
    assert "error" not in df.columns and len(df) == 4 * 4


def test_sweep_failing_point_raises_the_cli_error():
    path = os.path.join(SCENARIOS, "default.ini")
    with pytest.raises(offsim.Error) as e:
        offsim.sweep(path, SWEEP, keep_going=False)
    assert_same_error(e, "sweep", path, *SWEEP_ARGS)


def test_keep_going_with_plot_is_refused_as_the_cli():
    path = os.path.join(SCENARIOS, "default.ini")
    status, out, err = cli("sweep", path, *SWEEP_ARGS, "--keep-going", "--plot", "x")
    assert status == 2 and "--keep-going" in err and out == ""


def test_model_is_the_cli():
    config = os.path.join(SCENARIOS, "models", "qwen2.5-0.5b.json")
    text = offsim.model(config, batch=2, seq=512, ops="fused")
    assert text == cli_ok("model", "--hf-config", config, "--batch", "2", "--seq", "512", "--ops", "fused")
    # ...and runs as scenario text.
    assert_frame_is(offsim.compare(text), cli_ok("compare", "-", "--format", "csv", input=text))


@pytest.mark.parametrize(
    "call, args",
    [
        (lambda: offsim.run("/nonexistent/scenario.ini"), ["run", "/nonexistent/scenario.ini"]),
        (lambda: offsim.run(None, policy="nope"), ["run", "--policy", "nope"]),
        (lambda: offsim.compare({"device": {"memory": "lots"}}), ["compare", "-"]),
        (lambda: offsim.plan(os.path.join(SCENARIOS, "tiny.ini"), budget="0GiB"),
         ["plan", os.path.join(SCENARIOS, "tiny.ini"), "--budget", "0GiB"]),
        (lambda: offsim.model(os.path.join(SCENARIOS, "tiny.ini"), batch=2, seq=512),
         ["model", "--hf-config", os.path.join(SCENARIOS, "tiny.ini"), "--batch", "2", "--seq", "512"]),
    ],
    ids=["missing-file", "unknown-policy", "bad-value", "zero-budget", "not-json"],
)
def test_errors_are_the_cli_line_and_exit_status(call, args):
    with pytest.raises(offsim.Error) as e:
        call()
    stdin = offsim.scenario_text({"device": {"memory": "lots"}}) if "-" in args else None
    assert_same_error(e, *args, input=stdin)


def test_main_is_the_executable():
    for args in (["--help"], ["--version"], ["run", "--help"], ["bogus"]):
        status, out, line = offsim.main(args)
        cli_status, cli_out, cli_err = cli(*args)
        assert (status, out) == (cli_status, cli_out)
        assert (line is None and cli_err == "") or cli_err == "offsim: %s\n" % line


def test_a_refused_write_fails_as_a_closed_stdout():
    def refuse(text):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        offsim.main(["compare"], on_output=refuse)
    # The next call is whole: nothing of the failed one is left behind.
    assert offsim.run().attrs["csv"] == cli_ok("run", "--format", "csv")


def test_pip_installs_from_the_checkout_without_network(tmp_path):
    """`pip install --no-build-isolation --no-index` of a copy of python/ packages this build's
    library; the installed package runs, and offsim_torch (the PyTorch tools) is installed beside it."""
    pytest.importorskip("pip")
    src = tmp_path / "src"
    shutil.copytree(os.path.join(SOURCE, "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, OFFSIM_LIBRARY=offsim._library_path())
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", "--target",
                    str(tmp_path / "site"), str(src)], check=True, env=env, capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    env.pop("OFFSIM_LIBRARY", None)
    code = "import offsim, sys; sys.stdout.write(offsim.run().attrs['csv']); sys.stderr.write(offsim.__file__)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert p.stdout == cli_ok("run", "--format", "csv")
    assert p.stderr.startswith(str(tmp_path / "site"))
    code = "import offsim_torch, sys; sys.stdout.write(offsim_torch.__file__)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert p.stdout == str(tmp_path / "site" / "offsim_torch" / "__init__.py")
    assert (tmp_path / "site" / "offsim_torch" / "recorder.py").is_file()


def readme_block(marker, fence):
    """The fenced block right after `marker` in README.md."""
    text = open(os.path.join(SOURCE, "README.md")).read()
    after = text[text.index(marker) + len(marker):]
    start = after.index(fence + "\n") + len(fence) + 1
    return after[start:after.index("\n```", start) + 1]


def test_readme_session_prints_what_the_readme_shows(tmp_path):
    """README.md's Python session, run from a scratch root (scenarios/ linked, plots-out/ made),
    prints the block shown under it and draws its picture."""
    pytest.importorskip("matplotlib")
    session = readme_block("<!-- offsim-python-session -->", "```python")
    shown = readme_block("<!-- offsim-python-output -->", "```")
    os.symlink(SCENARIOS, tmp_path / "scenarios")
    (tmp_path / "plots-out").mkdir()
    env = dict(os.environ, MPLBACKEND="Agg", MPLCONFIGDIR=str(tmp_path / "mpl"))
    p = subprocess.run([sys.executable, "-c", session], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == shown
    assert (tmp_path / "plots-out" / "python-sweep.png").stat().st_size > 0
