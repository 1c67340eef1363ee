#!/usr/bin/env python3
"""Writes the sections and keys of torchtitan's TOML job config (torchtitan/config/job_config.py, the
JobConfig dataclass of the TOML-era releases) as JSON facts: each key with its type as written, its
Literal choices and its default. Reads the file's syntax tree only; nothing of torchtitan runs.
Also lists the model flavors its registries name (torchtitan/models/<name>/__init__.py).

usage: dump-torchtitan-config.py JOB_CONFIG_PY SOURCE_NAME COMMIT [MODELS_DIR] > config.json"""
import ast
import json
import os
import sys


def literal_choices(node):
    """['a', 'b'] for Literal['a', 'b'] (possibly inside `| None`)."""
    if isinstance(node, ast.BinOp):
        return literal_choices(node.left) or literal_choices(node.right)
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "Literal":
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [e.value for e in elts if isinstance(e, ast.Constant)]
    return None


def main():
    path, source, commit = sys.argv[1:4]
    tree = ast.parse(open(path).read())
    classes = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields = {}
        for item in node.body:
            if not isinstance(item, ast.AnnAssign) or not isinstance(item.target, ast.Name):
                continue
            entry = {"type": ast.unparse(item.annotation), "choices": literal_choices(item.annotation)}
            value = item.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "field":
                for kw in value.keywords:
                    if kw.arg == "default_factory" and isinstance(kw.value, ast.Name):
                        entry["section"] = kw.value.id
                    elif kw.arg == "default":
                        value = kw.value
            if isinstance(value, ast.Constant):
                entry["default"] = value.value
            fields[item.target.id] = entry
        classes[node.name] = fields

    def section(name):
        out = {}
        for key, entry in classes.get(name, {}).items():
            if "section" in entry and entry["section"] in classes:
                out[key] = section(entry["section"])
            else:
                out[key] = {k: v for k, v in entry.items() if k != "section"}
        return out

    result = {"source": source, "commit": commit, "sections": section("JobConfig")}
    if len(sys.argv) > 4:
        flavors = {}
        models = sys.argv[4]
        for model in sorted(os.listdir(models)):
            init = os.path.join(models, model, "__init__.py")
            if not os.path.isfile(init):
                continue
            for node in ast.walk(ast.parse(open(init).read())):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                    keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
                    name = getattr(node.targets[0], "id", "")
                    if keys and name.endswith("_configs") or name.endswith("_args"):
                        flavors[model] = sorted(set(flavors.get(model, []) + keys))
        result["flavors"] = flavors
    json.dump(result, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
