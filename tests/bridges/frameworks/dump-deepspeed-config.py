#!/usr/bin/env python3
"""Writes the DeepSpeed config keys Loom's export can write as JSON facts, read from DeepSpeed's sources
(syntax trees only): the top-level keys named in deepspeed/runtime/constants.py, the fields of the pydantic
models of the zero_optimization, fp16 and bf16 sections, the activation_checkpointing keys, the values
communication_data_type takes, and the launcher flags deepspeed.add_config_arguments adds.

usage: dump-deepspeed-config.py SOURCE_TREE SOURCE_NAME COMMIT > deepspeed.json"""
import ast
import json
import os
import re
import sys


def module_strings(path, suffix=""):
    """Values of NAME = "string" assignments (NAME ending in suffix)."""
    out = []
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            name = getattr(node.targets[0], "id", "")
            if name.endswith(suffix) and name.isupper():
                out.append(node.value.value)
    return out


def model_fields(path, cls):
    """Field names (and aliases) of a pydantic model class."""
    for node in ast.parse(open(path).read()).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            names = []
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.append(item.target.id)
                    if isinstance(item.value, ast.Call):
                        for kw in item.value.keywords:
                            if kw.arg == "alias" and isinstance(kw.value, ast.Constant):
                                names.append(kw.value.value)
            return sorted(set(names))
    raise SystemExit("no class " + cls + " in " + path)


def main():
    tree, source, commit = sys.argv[1:4]
    rt = os.path.join(tree, "deepspeed", "runtime")
    top = module_strings(os.path.join(rt, "constants.py")) + module_strings(os.path.join(rt, "zero", "config.py"))
    top += module_strings(os.path.join(rt, "activation_checkpointing", "config.py"))
    # get_communication_data_type's accepted values, as its error message lists them
    text = open(os.path.join(rt, "config.py")).read()
    match = re.search(r"Invalid communication_data_type\. Supported data types: \[([^\]]*)\]", text)
    comm_types = [v.strip().strip("'\"") for v in match.group(1).split(",")] if match else []
    ac = module_strings(os.path.join(rt, "activation_checkpointing", "config.py"))
    launcher = []
    for node in ast.walk(ast.parse(open(os.path.join(tree, "deepspeed", "__init__.py")).read())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            launcher += [a.value for a in node.args if isinstance(a, ast.Constant)]
    facts = {
        "source": source,
        "commit": commit,
        "top_level_strings": sorted(set(top)),
        "zero_optimization": model_fields(os.path.join(rt, "zero", "config.py"), "DeepSpeedZeroConfig"),
        "fp16": model_fields(os.path.join(rt, "precision_config.py"), "DeepSpeedFP16Config"),
        "bf16": model_fields(os.path.join(rt, "precision_config.py"), "DeepSpeedBF16Config"),
        "activation_checkpointing_strings": sorted(set(ac)),
        "launcher_flags": sorted(launcher),
        "communication_data_type": comm_types,
    }
    json.dump(facts, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
