#!/usr/bin/env python3
"""make wheel: the pure-Python wheel setuptools built, made what it is, a
wheel for one platform that carries a compiled library.

usage: wheel_platform.py WHEEL LIBRARY

WHEEL (kvcmp-V-py3-none-any.whl) is rewritten as
kvcmp-V-py3-none-linux_MACHINE.whl: its WHEEL file says
Root-Is-Purelib: false and Tag: py3-none-linux_MACHINE (the package is
ctypes over LIBRARY: any Python 3, one machine), and its METADATA gains a
Requires-External line per shared library LIBRARY loads beside the C
library itself (the dynamic linker's list, ldd), so that the wheel says
what a machine needs to import it.  RECORD is rewritten to match."""
import base64
import hashlib
import os
import platform
import re
import subprocess
import sys
import zipfile

# The C library and the dynamic linker: every glibc system has them.
SYSTEM = re.compile(r"^(linux-vdso|linux-gate|ld-linux[-.\w]*|libc|libm|libpthread|libdl|librt|libresolv)\.so")


def shared_dependencies(library):
    """Sonames the library loads, directly or through another one."""
    out = subprocess.run(["ldd", library], check=True, capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        name = line.strip().split(" ", 1)[0]
        if "not found" in line:
            sys.exit("wheel_platform: %s needs %s, which the dynamic linker does not find" % (library, name))
        if name and not name.startswith("/") and not SYSTEM.match(name) and name not in names:
            names.append(name)
    return names


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main(wheel, library):
    machine = platform.machine()
    tag = "py3-none-linux_%s" % machine
    base = os.path.basename(wheel)
    if not base.endswith("-py3-none-any.whl"):
        sys.exit("wheel_platform: %s is not a py3-none-any wheel" % wheel)
    target = os.path.join(os.path.dirname(wheel), base[:-len("any.whl")] + "linux_%s.whl" % machine)
    requires = shared_dependencies(library)
    with zipfile.ZipFile(wheel) as z:
        entries = [(info, z.read(info)) for info in z.infolist()]
    rewritten, record_name, lines = [], None, []
    for info, data in entries:
        name = info.filename
        if name.endswith(".dist-info/RECORD"):
            record_name = name
            continue
        if name.endswith(".dist-info/WHEEL"):
            text = data.decode()
            text = re.sub(r"(?m)^Root-Is-Purelib: .*$", "Root-Is-Purelib: false", text)
            text = re.sub(r"(?m)^Tag: .*$", "Tag: " + tag, text)
            data = text.encode()
        if name.endswith(".dist-info/METADATA"):
            head, sep, body = data.decode().partition("\n\n")
            head = "\n".join([head.rstrip("\n")] + ["Requires-External: " + r for r in requires])
            data = (head + "\n" + sep + body if sep else head + "\n").encode()
        rewritten.append((info, data))
        lines.append(record_line(name, data))
    if record_name is None:
        sys.exit("wheel_platform: %s has no RECORD" % wheel)
    lines.append(record_name + ",,")
    with zipfile.ZipFile(target + ".partial", "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in rewritten:
            z.writestr(info, data)
        z.writestr(record_name, "\n".join(lines) + "\n")
    os.replace(target + ".partial", target)
    os.remove(wheel)
    print(target)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1], sys.argv[2])
