#!/usr/bin/env python3
"""Writes the flags of Megatron-LM's (or Megatron-DeepSpeed's) argument parser as JSON facts: each option
string with its type, choices, nargs and whether it takes a value. Run on a source tree of the framework
(git archive <tag> megatron | tar -x); torch and the other libraries the framework imports are stood in for,
as only the parser's definitions are read, never run.

usage: dump-megatron-args.py SOURCE_TREE SOURCE_NAME COMMIT > flags.json
(Debian's /usr/bin/python3 with python3-numpy and python3-packaging; e.g.
 git --git-dir=MIRROR archive core_v0.19.0 megatron | tar -x -C tree &&
 dump-megatron-args.py tree "Megatron-LM core_v0.19.0" $(git --git-dir=MIRROR rev-parse core_v0.19.0^{commit}))"""
import argparse
import collections
import importlib.abc
import importlib.machinery
import json
import sys
import types
import typing


class _Meta(typing._ProtocolMeta):
    """Classes that stand in for whatever a missing library provides: any attribute is another such class,
    calling one gives an instance that behaves alike, versions compare as new enough."""

    def __getattr__(cls, name):
        if name in ("__fields__", "model_fields"):  # pydantic's
            return collections.defaultdict(lambda: _make("field"))
        if name == "__file__":
            return "/nonexistent/stub.py"
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _make(name)

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # a decorator
        return _make(cls.__name__ + "()")

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False

    def __ge__(cls, other):
        return True

    __gt__ = __le__ = __lt__ = __ge__

    def __int__(cls):
        return 0

    def __index__(cls):
        return 0

    def __float__(cls):
        return 0.0

    def __str__(cls):
        return "0.0.0"

    def __hash__(cls):
        return id(cls)

    def __eq__(cls, other):
        return cls is other

    def __enter__(cls):
        return cls

    def __exit__(cls, *a):
        return False


def _make(name):
    return _Meta(str(name), (), {"__init_subclass__": classmethod(lambda cls, **kw: None)})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name == "add_config_arguments":  # deepspeed's: its flags are in deepspeed.json
            return lambda parser: parser
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _make(name)


class _Stub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Any module outside the framework that is not installed becomes a mock."""

    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top == "megatron" or top in sys.stdlib_module_names or top.startswith("_"):
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            try:
                spec = finder.find_spec(name, path, target)
            except Exception:
                spec = None
            if spec is not None:
                return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        m.__spec__ = spec
        m.__version__ = "2.6.0"
        return m

    def exec_module(self, module):
        pass


def _parserOf(arguments):
    """The parser that arguments.parse_args builds, taken when it parses."""
    captured = {}
    real = argparse.ArgumentParser.parse_known_args

    def grab(self, args=None, namespace=None):
        captured["parser"] = self
        raise SystemExit(0)

    argparse.ArgumentParser.parse_known_args = grab
    try:
        arguments.parse_args(ignore_unknown_args=True)
    except SystemExit:
        pass
    finally:
        argparse.ArgumentParser.parse_known_args = real
    return captured["parser"]


def main():
    tree, source, commit = sys.argv[1:4]
    sys.path.insert(0, tree)
    sys.meta_path.insert(0, _Stub())
    if not hasattr(typing, "override"):  # Python 3.12's, used by recent Megatron-LM
        typing.override = lambda f: f
    out, sys.stdout = sys.stdout, sys.stderr  # what the imports print
    parser = argparse.ArgumentParser(allow_abbrev=False)
    try:
        import megatron.training.arguments as arguments
    except ModuleNotFoundError:
        import megatron.arguments as arguments  # Megatron-DeepSpeed, Megatron-LM before core 0.6
    if hasattr(arguments, "add_megatron_arguments"):
        parser = arguments.add_megatron_arguments(parser)
    else:  # parse_args builds the parser itself: capture it at parse time
        parser = _parserOf(arguments)
    sys.stdout = out
    flags = {}
    for action in parser._actions:
        kind = type(action).__name__
        typ = action.type
        tname = None
        if typ is not None:
            tname = getattr(typ, "__name__", str(typ))
        choices = None
        if action.choices is not None:
            choices = [c if isinstance(c, (int, float, str)) else str(c) for c in action.choices]
        takes_value = action.nargs != 0
        for opt in action.option_strings:
            flags[opt] = {
                "dest": action.dest,
                "takes_value": takes_value,
                "nargs": action.nargs if isinstance(action.nargs, (int, str)) else None,
                "type": tname,
                "choices": choices,
            }
    # One flag a line, so that a new version's file reads as a diff of flags.
    lines = ['  %s: %s' % (json.dumps(k), json.dumps(v, separators=(",", ":"))) for k, v in sorted(flags.items())]
    sys.stdout.write('{"source": %s, "commit": %s, "flags": {\n%s\n}}\n'
                     % (json.dumps(source), json.dumps(commit), ",\n".join(lines)))


if __name__ == "__main__":
    main()
