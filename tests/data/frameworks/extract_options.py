#!/usr/bin/env python3
"""Writes the option names each framework's own source defines, one file per framework
(tests/data/frameworks/NAME.txt), for tests/emit_test.py: every name `offsim plan --emit NAME`
writes must be in its file.  Each file's first line names the repository, the commit and the
files the names come from.

Usage: extract_options.py MIRROR_ROOT OUT_DIR
MIRROR_ROOT holds bare clones named OWNER+REPO/repo (the commits below must be in them).
Rerun it to move to newer commits; commit the files it writes.
"""

import os
import re
import subprocess
import sys

SOURCES = {
    # Megatron-LM builds its arguments from TransformerConfig's fields ("--" + the name with
    # dashes: megatron/training/argument_utils.py, ArgumentGroupFactory._format_arg_name) and
    # adds the rest by hand in arguments.py.
    "megatron": ("NVIDIA/Megatron-LM", "d98e8a64ddf34856e74b24714e3bedb2f5a39553",
                 ["megatron/core/transformer/transformer_config.py", "megatron/training/arguments.py"]),
    # torchtune: the recipe configs' top-level keys.
    "torchtune": ("pytorch/torchtune", "bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1", ["recipes/configs"]),
    # verl: the keys of the generated PPO trainer config (actor_rollout_ref.model.*).
    "verl": ("volcengine/verl", "b178a3cd56f58b2d502255daba591e92833930a7",
             ["verl/trainer/config/_generated_ppo_trainer.yaml"]),
    # TransformerEngine: get_cpu_offload_context and its parameters.
    "te": ("NVIDIA/TransformerEngine", "d0067d0da6cb01811b8072a7d304f0e00344ce2b",
           ["transformer_engine/pytorch/cpu_offload.py"]),
    # DeepSpeed: the activation_checkpointing keys (the ACT_CHKPT_* strings).
    "deepspeed": ("microsoft/DeepSpeed", "38327e07f6cd39b63418f60cedd1651b0be3e7c3",
                  ["deepspeed/runtime/activation_checkpointing/config.py"]),
    # torchtitan: the last commit with the TOML [activation_checkpoint] table (9810191, the
    # next one, replaced TOML with Python dataclasses): JobConfig's table names and
    # ActivationCheckpoint's fields.
    "torchtitan": ("pytorch/torchtitan", "238fa9953e4aec2a62582121564273d7cbb1e9f1",
                   ["torchtitan/config/job_config.py"]),
}


def git(mirror, *args):
    return subprocess.run(["git", "--git-dir", mirror, *args], check=True, capture_output=True, text=True).stdout


def files(mirror, commit, path):
    listed = git(mirror, "ls-tree", "-r", "--name-only", commit, "--", path).split()
    return [f for f in listed if f == path or f.endswith((".py", ".yaml"))]


def class_fields(text, name):
    """The annotated fields of class `name` (4-space indented `field: type`)."""
    body = text.split("\nclass %s" % name, 1)[1]
    body = re.split(r"\n(?:class |def |@)", body, 1)[0]
    return re.findall(r"^    (\w+)\s*:", body, re.M)


def names(kind, read):
    out = set()
    if kind == "megatron":
        config = read("megatron/core/transformer/transformer_config.py")
        out |= {"--" + f.replace("_", "-") for f in class_fields(config, "TransformerConfig")}
        out |= set(re.findall(r"['\"](--[a-z0-9][a-z0-9-]*)['\"]", read("megatron/training/arguments.py")))
    elif kind in ("torchtune",):
        for text in read(None):
            out |= set(re.findall(r"^(\w+):", text, re.M))
    elif kind == "verl":
        out |= set(re.findall(r"^\s*(\w+):", read("verl/trainer/config/_generated_ppo_trainer.yaml"), re.M))
    elif kind == "te":
        text = read("transformer_engine/pytorch/cpu_offload.py")
        signature = text.split("\ndef get_cpu_offload_context(", 1)[1].split("):", 1)[0]
        out.add("get_cpu_offload_context")
        out |= set(re.findall(r"^\s*(\w+)\s*:", signature, re.M))
    elif kind == "deepspeed":
        out |= set(re.findall(r"^ACT_CHKPT\w* = '(\w+)'", read("deepspeed/runtime/activation_checkpointing/config.py"), re.M))
    elif kind == "torchtitan":
        text = read("torchtitan/config/job_config.py")
        out |= set(class_fields(text, "ActivationCheckpoint"))
        out |= set(class_fields(text, "JobConfig"))
    return sorted(out)


def main(root, out_dir):
    for kind, (repo, commit, paths) in SOURCES.items():
        mirror = os.path.join(root, repo.replace("/", "+"), "repo")
        listed = [f for p in paths for f in files(mirror, commit, p)]

        def read(path):
            if path is None:
                return [git(mirror, "show", "%s:%s" % (commit, f)) for f in listed]
            return git(mirror, "show", "%s:%s" % (commit, path))

        found = names(kind, read)
        with open(os.path.join(out_dir, kind + ".txt"), "w") as f:
            f.write("# %s@%s %s\n" % (repo, commit, " ".join(paths)))
            f.writelines(n + "\n" for n in found)
        print("%s: %d names" % (kind, len(found)))


if __name__ == "__main__":
    main(*sys.argv[1:])
