"""The ctypes mirrors of the C structs (xattn._capi) match the C header.

A small C program built with the library (tests/abi/xattn_struct_layout.c,
target xattn_struct_layout) prints every public struct's size, alignment and
fields (name, offset, size) as the compiler lays them out. This test compares
that with the Python binding's ctypes Structures, field by field, and the C
program's field lists with the header's own declarations, so that a field
added to the header, to the C program or to the binding alone fails here.

Runs under pytest (the program is found through $XATTN_STRUCT_LAYOUT, else in
a preset's build directory; skipped, saying so, when none is built) and as a
script from ctest (``python3 test_struct_layout.py PROGRAM``, label abi),
which needs only the standard library: the binding's module is loaded without
the package's __init__ (no numpy, no shared library).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HEADERS = ("xattn.h", "xattn_multi.h")

# C struct -> the ctypes class of xattn._capi that mirrors it, or None where the
# binding does not use the struct (say why).
MIRRORS = {
    "xattn_tensor": "Tensor",
    "xattn_attn_desc": "AttnDesc",
    "xattn_run_info": "RunInfo",
    "xattn_record": "Record",
    "xattn_device_info": "DeviceInfo",
    "xattn_mem_stats": "MemStats",
    "xattn_ceilings": "Ceilings",
    "xattn_multi_part": None,  # xattn_attention_multi is not bound in Python
    "xattn_multi_info": None,
}


def load_capi():
    """xattn._capi, imported without running the package's __init__ when the
    package is not imported already (the ctest path: no numpy, no library)."""
    if "xattn" not in sys.modules:
        pkg = types.ModuleType("xattn")
        pkg.__path__ = [str(REPO / "python" / "src" / "xattn")]
        sys.modules["xattn"] = pkg
    import importlib

    return importlib.import_module("xattn._capi")


def header_fields(include_dir: Path) -> dict:
    """{struct name: [field names in order]} for every `typedef struct NAME {...} NAME;`
    of the public headers the layout program covers."""
    out = {}
    for h in HEADERS:
        text = (include_dir / h).read_text()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
            tag, body, name = m.group(1), m.group(2), m.group(3)
            assert tag == name, f"{h}: struct {tag} typedef'd as {name}"
            names = []
            for decl in body.split(";"):
                decl = re.sub(r"\[[^\]]*\]", "", decl).strip()
                if not decl:
                    continue
                assert "(" not in decl and "{" not in decl, f"{h}: {name}: cannot read {decl!r}"
                parts = [p.strip() for p in decl.split(",")]
                names.append(re.findall(r"\w+", parts[0])[-1])
                names += [p.lstrip("* ").strip() for p in parts[1:]]
            out[name] = names
    return out


def find_program():
    env = os.environ.get("XATTN_STRUCT_LAYOUT")
    if env:
        return env
    for preset in ("ci", "release", "debug", "asan", "dev"):
        p = REPO / "build" / preset / "tests" / "xattn_struct_layout"
        if p.exists():
            return str(p)
    return None


def c_layout(program: str) -> dict:
    res = subprocess.run([program], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def mismatches(c: dict, capi, headers: dict) -> list:
    """Every difference between the C layout, the header's declarations and the
    ctypes mirrors, as lines; empty when they agree."""
    import ctypes

    bad = []
    for name in sorted(set(headers) | set(c) | set(MIRRORS)):
        if name not in headers:
            bad.append(f"{name}: not a struct of {', '.join(HEADERS)} (stale entry)")
            continue
        if name not in c:
            bad.append(f"{name}: declared in the header, missing from xattn_struct_layout.c")
            continue
        if name not in MIRRORS:
            bad.append(f"{name}: new struct: add it to MIRRORS (its ctypes class, or None)")
        cfields = [f["name"] for f in c[name]["fields"]]
        if cfields != headers[name]:
            bad.append(f"{name}: xattn_struct_layout.c lists {cfields}, the header {headers[name]}")
        cls_name = MIRRORS.get(name)
        if cls_name is None:
            continue
        cls = getattr(capi, cls_name)
        pyfields = [f[0] for f in cls._fields_]
        if pyfields != cfields:
            missing = [f for f in cfields if f not in pyfields]
            extra = [f for f in pyfields if f not in cfields]
            bad.append(f"{name} / {cls_name}: fields differ (missing in Python: {missing}, "
                       f"not in C: {extra}, or in another order)")
        for f in c[name]["fields"]:
            desc = getattr(cls, f["name"], None)
            if desc is None or f["name"] not in pyfields:
                continue
            if (desc.offset, desc.size) != (f["offset"], f["size"]):
                bad.append(f"{name}.{f['name']}: C offset {f['offset']} size {f['size']}, "
                           f"{cls_name} offset {desc.offset} size {desc.size}")
        if ctypes.sizeof(cls) != c[name]["size"]:
            bad.append(f"{name}: sizeof {c[name]['size']} in C, {ctypes.sizeof(cls)} in {cls_name}")
        if ctypes.alignment(cls) != c[name]["align"]:
            bad.append(f"{name}: alignment {c[name]['align']} in C, "
                       f"{ctypes.alignment(cls)} in {cls_name}")
    return bad


def test_struct_layout():
    import pytest

    program = find_program()
    if program is None:
        pytest.skip("tests/xattn_struct_layout is not built here (set XATTN_STRUCT_LAYOUT "
                    "or build a preset)")
    bad = mismatches(c_layout(program), load_capi(), header_fields(REPO / "include"))
    assert not bad, "\n".join(bad)


def test_header_reader_sees_every_field():
    # The reader above on declarations of every shape the headers use.
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "xattn.h").write_text(
            "typedef struct xattn_t { /* c; d; */ size_t a; const int32_t *p, *q;\n"
            "  char n[4][16]; int x, y; // z;\n  double w[4]; } xattn_t;\n")
        (Path(d) / "xattn_multi.h").write_text("")
        assert header_fields(Path(d)) == {"xattn_t": ["a", "p", "q", "n", "x", "y", "w"]}


def main(argv):
    if len(argv) != 2:
        print("usage: test_struct_layout.py XATTN_STRUCT_LAYOUT_PROGRAM", file=sys.stderr)
        return 2
    c = c_layout(argv[1])
    bad = mismatches(c, load_capi(), header_fields(REPO / "include"))
    for line in bad:
        print("MISMATCH " + line)
    print(f"{len(c)} structs, {sum(len(s['fields']) for s in c.values())} fields compared: "
          f"{len(bad)} mismatch{'es' if len(bad) != 1 else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
