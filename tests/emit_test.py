"""`offsim plan --framework NAME --emit NAME` against the frameworks' own names and against the
plan it writes: every option name emitted is one the framework's source defines (the lists
tests/data/frameworks/extract_options.py extracted, with the commit each came from), and the
configuration, read back with each framework's documented meaning (written here, apart from
offsim's C), selects exactly the per-layer actions of the plan `--format json` prints for the same
request.  Also: `--emit` alone emits only a plan the framework can express (else exit 2, naming
--framework), the restriction never beats the per-layer plan, and mismatched names are exit 2.

Usage: emit_test.py OFFSIM_BINARY SOURCE_DIR.  Standard library only (json, tomllib).
"""

import json
import os
import re
import sys
import tomllib

from clitest import Checks

OFFSIM, SOURCE = sys.argv[1], sys.argv[2]
DATA = os.path.join(SOURCE, "tests", "data", "frameworks")
TARGETS = ["megatron", "torchtune", "verl", "te", "deepspeed", "torchtitan"]
# The bundled Llama-3.1-8B (HF ops: selective recompute and Megatron's modules apply), and
# the plain one; budgets from tight to loose, so that each framework's shapes change.
SCENARIOS = ["scenarios/frameworks/llama-3.1-8b.ini", "scenarios/llama-3.1-8b.ini"]
BUDGETS = ["40GiB", "50GiB", "60GiB", "70GiB", "90GiB"]
checks = Checks(OFFSIM, SOURCE)
check, offsim = checks.check, checks.offsim


def known(target):
    with open(os.path.join(DATA, target + ".txt")) as f:
        header = f.readline()
        assert re.match(r"# \S+/\S+@[0-9a-f]{40} ", header), header
        return {line.strip() for line in f if line.strip()}


def body(text):
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def yaml_keys(lines):
    """The keys of a block YAML of `key: value` and nested `key:` lines; values as text."""
    out, values = [], {}
    for line in lines:
        m = re.match(r"^(\s*)(\w+):\s*(.*)$", line)
        assert m, line
        out.append(m.group(2))
        values[m.group(2)] = m.group(3)
    return out, values


def names_and_actions(target, text, n):
    """(the option names the text uses, the per-layer actions they mean)."""
    lines = body(text)
    if target == "megatron":
        args = " ".join(l.rstrip("\\").strip() for l in lines).split()
        names = [a for a in args if a.startswith("--")]
        value = lambda flag: args[args.index(flag) + 1] if flag in args else None
        offload = "--fine-grained-activation-offloading" in args
        granularity = value("--recompute-granularity")
        if granularity == "selective":
            assert value("--recompute-modules") == "core_attn"
            return names, ["selective+offload" if offload else "selective"] * n
        first = int(value("--recompute-num-layers")) if granularity == "full" else 0
        assert granularity is None or value("--recompute-method") == "block"
        return names, ["recompute" if i < first else "offload" if offload else "keep" for i in range(n)]
    if target in ("torchtune", "verl"):
        names, values = yaml_keys(lines)
        if target == "torchtune":
            ac, off = values["enable_activation_checkpointing"], values["enable_activation_offloading"]
            keep_last = 0
        else:
            assert names[:2] == ["actor_rollout_ref", "model"]
            ac, off = values["enable_gradient_checkpointing"], values["enable_activation_offload"]
            keep_last = 1  # verl's offload keeps the last layer
        ac, off = ac == "true", off == "true"
        act = ("recompute+offload" if off else "recompute") if ac else ("offload" if off else "keep")
        plain = {"offload": "keep", "recompute+offload": "recompute"}
        return names, [plain.get(act, act) if i >= n - keep_last else act for i in range(n)]
    if target == "te":
        call = " ".join(lines)
        names = re.findall(r"(\w+)\(", call) + re.findall(r"(\w+)=", call)
        kw = dict(re.findall(r"(\w+)=(\w+)", call))
        assert int(kw["model_layers"]) == n
        first = int(kw["num_layers"]) if kw["enabled"] == "True" else 0
        return names, ["offload" if i < first else "keep" for i in range(n)]
    if target == "deepspeed":
        config = json.loads(text)
        ac = config["activation_checkpointing"]
        names = list(config) + list(ac)
        assert ac["number_checkpoints"] in (0, n)
        act = ("recompute+offload" if ac["cpu_checkpointing"] else "recompute") if ac["number_checkpoints"] else "keep"
        return names, [act] * n
    if target == "torchtitan":
        config = tomllib.loads(text)
        ac = config["activation_checkpoint"]
        names = list(config) + list(ac)
        if ac["mode"] == "selective":
            k = int(ac["selective_ac_option"])
            return names, ["recompute" if (i + 1) % k == 0 else "keep" for i in range(n)]
        return names, ["recompute" if ac["mode"] == "full" else "keep"] * n
    raise AssertionError(target)


emitted_shapes = {t: set() for t in TARGETS}
for scenario in SCENARIOS:
    for budget in BUDGETS:
        for target in TARGETS:
            what = "%s %s %s" % (scenario, budget, target)
            status, out, err = offsim("plan", scenario, "--budget", budget, "--framework", target, "--format", "json")
            check(status in (0, 4), "%s: plan exit %d: %s" % (what, status, err))
            if status not in (0, 4):
                continue
            plan = json.loads(out)
            f = plan["framework"]
            check(f["name"] == target, what + ": framework name")
            # The cost is the two plans' difference (negative where the per-layer search, a local
            # search for a framework's schedule, missed the shape's plan).
            check(abs(f["restriction_ms"] - (plan["step_ms"] - f["unrestricted_step_ms"])) < 1e-9, what + ": cost")
            status, text, err = offsim("plan", scenario, "--budget", budget, "--framework", target, "--emit", target)
            if not plan["feasible"]:
                check(status == 4 and "no plan fits" in err and text == "", what + ": infeasible emit is exit 4")
                continue
            check(status == 0, "%s: emit exit %d: %s" % (what, status, err))
            names, actions = names_and_actions(target, text, len(plan["actions"]))
            unknown = sorted(set(names) - known(target))
            check(not unknown, "%s: names not in the framework's source: %s" % (what, unknown))
            check(actions == plan["actions"], "%s: the config means %s, the plan is %s" % (what, actions, plan["actions"]))
            emitted_shapes[target].add(tuple(actions))

# Each framework emitted more than one configuration over these budgets (the checks above saw
# its switches both ways), Megatron and torchtitan their counts too.
for target in TARGETS:
    check(len(emitted_shapes[target]) >= 2, "%s: only %s emitted" % (target, emitted_shapes[target]))

# --emit alone: the per-layer plan, when the framework can express it.
scenario = SCENARIOS[1]
status, text, err = offsim("plan", scenario, "--budget", "60GiB", "--emit", "te")
check(status == 2 and err.startswith("offsim: --emit te: te's configuration cannot express the plan")
      and "--framework te" in err and text == "", "emit alone of an inexpressible plan: %d %s" % (status, err))
# The default scenario's resident step fits 20 GiB: the plan keeps everything, which every
# framework can say.
status, out, err = offsim("plan", "scenarios/default.ini", "--budget", "20GiB", "--format", "json")
actions = json.loads(out)["actions"]
check(set(actions) == {"keep"}, "default.ini at 20 GiB plans %s" % actions)
for target in TARGETS:
    status, text, err = offsim("plan", "scenarios/default.ini", "--budget", "20GiB", "--emit", target)
    check(status == 0, "%s: emit alone of resident: %d %s" % (target, status, err))
    if status == 0:
        names, acts = names_and_actions(target, text, len(actions))
        check(acts == actions, "%s: resident emitted as %s" % (target, acts))
        check(not set(names) - known(target), "%s: unknown names %s" % (target, names))

for args, message in [
    (["--framework", "te", "--emit", "megatron"], "offsim: --emit megatron: the plan is searched for --framework te"),
    (["--framework", "save_on_cpu", "--emit", "te"], "offsim: --emit te: the plan is searched for --framework save_on_cpu"),
    (["--emit", "save_on_cpu"], "offsim: --emit: expected one of megatron, torchtune, verl, te, deepspeed, torchtitan, got 'save_on_cpu'"),
    (["--framework", "nope"], "offsim: --framework: expected one of megatron, torchtune, verl, te, deepspeed, torchtitan or save_on_cpu, got 'nope'"),
    (["--emit", "te", "--format", "json"], "offsim: --emit: prints the framework's configuration; not with --format"),
]:
    status, out, err = offsim("plan", scenario, "--budget", "60GiB", *args)
    check(status == 2 and err.startswith(message) and out == "", "%s: %d %s" % (args, status, err))

# README.md's example: the block after its marker is what its command prints.
checks.readme_example(open(os.path.join(SOURCE, "README.md")).read(), "<!-- offsim-emit-output -->")
checks.finish("emit_test", "every emitted name is the framework's own and every configuration is its plan")
