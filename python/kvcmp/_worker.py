"""kvcmp's Python worker: runs a Python candidate for the campaign engine.

The engine (libkvcmp, harness/backends/pyworker.c) starts it as

    PYTHON -c "import sys, kvcmp._worker as w; sys.exit(w.main(sys.argv))" SPEC

for a candidate ``py:SPEC`` (SPEC is FILE.py:FUNCTION or MODULE:FUNCTION),
with three descriptors open: 3 carries requests, 4 replies, 5 is a
shared-memory file holding the call's tensors.  Every message is one line
of JSON.

* First the worker says hello: ``{"hello": {"stages": [...], "candidate":
  NAME}}`` (the stages FUNCTION.stages lists, every stage when it has no
  such attribute) or ``{"fatal": MESSAGE}`` when the candidate cannot be
  loaded.
* Then, per stage call, the engine sends ``{"call": STAGE, "params":
  {...}, "threads": N, "size": BYTES, "seq": N, "tensors": [{"name", "dtype",
  "shape", "strides", "offset", "output"}, ...]}``; each tensor lies in the
  shared memory at its offset with its strides (a paged cache's page
  stride includes the page padding, which must stay untouched).  The
  worker calls FUNCTION(case) with a :class:`kvcmp.Case` whose tensors are
  views of that memory, writes what it returns into the output tensors,
  and answers one of
  ``{"status": "ok"}``,
  ``{"status": "rejected", "message": M, "code": C}`` (kvcmp.Rejected),
  ``{"status": "error", "class": K, "message": M, "restart": B}`` (an
  exception, a wrong output, a thread left running; with restart the
  engine replaces the worker), or
  ``{"status": "device-lost", "class": K, "message": M}``, after which the
  worker exits: its device is unusable and a fresh worker takes the next
  call.  Every reply also echoes the request's ``"seq"``: a reply line
  without it, with another call's, not JSON, or followed by more bytes
  means the candidate wrote into the reply stream, and the engine fails
  the call as "protocol" and replaces the worker.  A call the worker never answers (it hangs, crashes or exits) is
  the engine's: a timeout or a crash of that case.

A device is lost when the candidate raises :class:`kvcmp.DeviceLost`, or
an exception named AcceleratorError (torch's sticky CUDA errors), or one
whose message starts with "CUDA error:" (older torch).
"""
import json
import mmap
import os
import sys
import threading
import traceback

from ._candidate import offered_stages, resolve

REQUEST_FD, REPLY_FD, SHM_FD = 3, 4, 5


class DeviceLost(Exception):
    """Raise it (or a subclass) from a candidate whose device is no longer
    usable: the case fails as device-lost and a fresh worker runs the next
    one."""


class _Worker:
    def __init__(self, candidate):
        self.candidate = candidate
        self.shm = None
        self.size = 0
        self.requests = os.fdopen(REQUEST_FD, "rb")
        self.baseline_threads = self._user_threads()

    @staticmethod
    def _user_threads():
        return [t for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]

    def reply(self, message):
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(REPLY_FD, data):]

    def views(self, request):
        import numpy as np
        if request["size"] != self.size:
            self.shm = mmap.mmap(SHM_FD, request["size"])   # an older map lives on while a candidate holds views of it
            self.size = request["size"]
        views, outputs = {}, []
        for t in request["tensors"]:
            views[t["name"]] = np.ndarray(tuple(t["shape"]), np.dtype(t["dtype"]), buffer=self.shm, offset=t["offset"],
                                          strides=tuple(t["strides"]))
            if t["output"]:
                outputs.append(t["name"])
        return views, outputs

    def call(self, request):
        from .case import Case, Rejected
        views, outputs = self.views(request)
        params = {k: (float(v) if isinstance(v, str) and k == "eps" else v) for k, v in request["params"].items()}
        case = Case(request["call"], params, {})
        case.tensors = views
        case.info = {"threads": request.get("threads", 1)}
        try:
            result = self.candidate(case)
            _store(result, views, outputs)
        except Rejected as e:
            code = e.status if isinstance(e.status, int) and 0 < e.status < 7 else None
            return {"status": "rejected", "message": str(e), "code": code}
        except BaseException as e:   # SystemExit and KeyboardInterrupt too: one failing case, not the worker's end
            return _failure(e)
        left = [t for t in self._user_threads() if t not in self.baseline_threads]
        if left:
            return {"status": "error", "class": "thread left running", "restart": True,
                    "message": "%d non-daemon thread(s) still running after the call (%s): join them before returning" % (
                        len(left), ", ".join(t.name for t in left[:3]))}
        return {"status": "ok"}

    def serve(self):
        for line in self.requests:
            request = json.loads(line)
            reply = self.call(request)
            reply["seq"] = request.get("seq")
            self.reply(reply)
            if reply["status"] == "device-lost":
                os._exit(0)


class WrongOutput(Exception):
    pass


def _store(result, views, outputs):
    """Writes what the candidate returned into the output views."""
    from .case import _as_array
    from .torch_case import TorchCase
    if result is None:
        return
    if isinstance(result, TorchCase):
        result = result.outputs()
    if not hasattr(result, "items"):
        raise WrongOutput("the candidate returned %s; expected None (outputs written in place), a dict {name: array} "
                          "or the case's TorchCase" % type(result).__name__)
    for name, value in result.items():
        if name not in outputs:
            raise WrongOutput("the candidate returned a tensor %r; this stage's outputs are %s" % (name, ", ".join(outputs)))
        if isinstance(value, TorchCase):
            value = value.outputs()[name]
        try:
            array = _as_array(name, value)
        except TypeError as e:
            raise WrongOutput(str(e))
        view = views[name]
        if array.dtype != view.dtype or array.shape != view.shape:
            raise WrongOutput("output %s is %s %s, expected %s %s" % (name, array.dtype, list(array.shape), view.dtype,
                                                                        list(view.shape)))
        if array.ctypes.data != view.ctypes.data:
            view[...] = array


def _device_lost(e):
    return (isinstance(e, DeviceLost) or type(e).__name__ == "AcceleratorError" or
            str(e).startswith("CUDA error:"))


def _failure(e):
    frames = traceback.extract_tb(e.__traceback__)
    where = " (at %s:%d)" % (frames[-1].filename, frames[-1].lineno) if frames else ""
    message = ("%s%s" % (e, where))[:300]
    if _device_lost(e):
        return {"status": "device-lost", "class": type(e).__name__, "message": message}
    name = "wrong output" if isinstance(e, WrongOutput) else type(e).__name__
    restart = not isinstance(e, (Exception,))   # SystemExit, KeyboardInterrupt: start clean
    return {"status": "error", "class": name, "message": message, "restart": restart}


def main(argv):
    if len(argv) != 2:
        os.write(REPLY_FD, b'{"fatal": "usage: kvcmp._worker.main([PROGRAM, FILE.py:FUNCTION|MODULE:FUNCTION])"}\n')
        return 2
    try:
        import numpy   # noqa: F401  (the worker's own needs: a clear message now, not per case)
        from . import case   # noqa: F401  (libkvcmp.so)
        candidate = resolve(argv[1])
        stages = offered_stages(candidate)
    except BaseException as e:
        message = "cannot load the Python candidate %s with %s: %s: %s" % (argv[1], sys.executable, type(e).__name__, e)
        if isinstance(e, ImportError):
            message += " (install it into that interpreter, or pass --python / set KVCMP_PYTHON to one that has it)"
        os.write(REPLY_FD, (json.dumps({"fatal": message}) + "\n").encode())
        return 1
    worker = _Worker(candidate)
    worker.reply({"hello": {"stages": stages, "candidate": argv[1], "python": sys.executable}})
    worker.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))   # python -m kvcmp._worker SPEC, by hand
