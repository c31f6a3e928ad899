"""What a candidate is, for every part of the package: the --candidate of
a callable (candidate_spec), the callable of a py: spec (resolve, in the
worker and where stages are listed), and the stages a Python candidate
offers (offered_stages).  Depends on nothing else of kvcmp."""
import importlib
import importlib.util
import os
import sys

STAGES = ("v4.save_partial_states", "v4.compress", "v41.save_compress_norm", "v41.rope_quant_insert", "v41.rope_plain_insert")


def candidate_spec(candidate):
    """The --candidate of a callable: py:FILE.py:FUNCTION for one defined in
    a script or a top-level module (a path resolves from any shell),
    py:MODULE:FUNCTION for one inside a package.  Strings pass through
    ("opt", "lib.so", "py:..."); "module:function" gains the py: prefix."""
    if isinstance(candidate, str):
        if candidate in ("opt", "opt-avx512", "opt-avx2", "ref", "optimized", "reference") or candidate.startswith("py:") or ".so" in candidate:
            return candidate
        return "py:" + candidate
    qualname = getattr(candidate, "__qualname__", None) or getattr(candidate, "__name__", None)
    module_name = getattr(candidate, "__module__", None)
    if not qualname or not module_name or "<" in qualname:
        raise ValueError("kvcmp.fuzz needs a candidate defined at the top level of a module or script (a worker process "
                         "imports it by name); %r is not" % (candidate,))
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if path and (module_name == "__main__" or "." not in module_name or module_name.startswith("kvcmp_candidate_")):
        return "py:%s:%s" % (os.path.abspath(path), qualname)
    return "py:%s:%s" % (module_name, qualname)


def _load_file(path):
    name = "kvcmp_candidate_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise ImportError("%s is not a Python file" % path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    return module


def resolve(spec):
    """The callable of FILE.py:FUNCTION or MODULE:FUNCTION (FUNCTION may be
    dotted: Class.method)."""
    where, sep, function = spec.rpartition(":")
    if not sep or not where or not function:
        raise ValueError("a Python candidate is FILE.py:FUNCTION or MODULE:FUNCTION, not '%s'" % spec)
    if where.endswith(".py") or os.sep in where:
        if not os.path.isfile(where):
            raise ValueError("candidate file %s does not exist (py:%s)" % (where, spec))
        target = _load_file(where)
    else:
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        target = importlib.import_module(where)
    for part in function.split("."):
        if not hasattr(target, part):
            raise ValueError("%s has no attribute %s (py:%s)" % (where, function, spec))
        target = getattr(target, part)
    if not callable(target):
        raise ValueError("%s:%s is a %s, not a callable" % (where, function, type(target).__name__))
    return target


def offered_stages(candidate):
    """FUNCTION.stages (names or name prefixes such as "v41"), else every stage."""
    declared = getattr(candidate, "stages", None)
    if declared is None:
        return list(STAGES)
    if isinstance(declared, str):
        declared = [s for s in declared.split(",") if s]
    offered = []
    for item in declared:
        matches = [s for s in STAGES if s == item or s.startswith(item + ".") or s.startswith(item)]
        if not matches:
            raise ValueError("candidate.stages names '%s', which is no stage (stages: %s)" % (item, ", ".join(STAGES)))
        offered += [s for s in matches if s not in offered]
    return offered
