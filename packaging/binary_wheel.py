"""Writes the `ctxbox-bin` wheel: the ctxbox binary as a script of the
wheel (`<name>.data/scripts/ctxbox`), so pip puts it in the venv's `bin/`,
beside a tiny `ctxbox_bin` package that says where it is. The same layout
ruff and uv ship on PyPI; built here by hand (a wheel is a zip with a
RECORD of hashes), so no Rust-aware Python build tool is needed.

    python3 binary_wheel.py BINARY VERSION PLATFORM_TAG LICENSE OUTDIR
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import zipfile

NAME = "ctxbox_bin"
DIST = "ctxbox-bin"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build(binary: str, version: str, platform_tag: str, license_file: str, outdir: str) -> str:
    """Writes the wheel into `outdir` and returns its path."""
    dist_info = f"{NAME}-{version}.dist-info"
    data_dir = f"{NAME}-{version}.data"
    with open(binary, "rb") as file:
        executable = file.read()
    with open(license_file, "rb") as file:
        license_text = file.read()
    files: list[tuple[str, bytes, int]] = [
        (f"{NAME}/__init__.py", (
            '"""The ctxbox binary this wheel installed into the environment\'s scripts folder."""\n\n'
            "import os\nimport sysconfig\n\n\n"
            "def path() -> str:\n"
            '    """Where `ctxbox` is (the environment\'s `bin/`)."""\n'
            '    return os.path.join(sysconfig.get_path("scripts"), "ctxbox")\n').encode(), 0o644),
        (f"{data_dir}/scripts/ctxbox", executable, 0o755),
        (f"{dist_info}/licenses/LICENSE", license_text, 0o644),
        (f"{dist_info}/METADATA", (
            "Metadata-Version: 2.4\n"
            f"Name: {DIST}\n"
            f"Version: {version}\n"
            "Summary: The ctxbox binary (runs AI-agent context engines as sandboxed WebAssembly components), "
            "for the Hermes plugin ctxbox-hermes\n"
            "License-Expression: MIT\n"
            "License-File: LICENSE\n"
            "Requires-Python: >=3.8\n").encode(), 0o644),
        (f"{dist_info}/WHEEL", (
            "Wheel-Version: 1.0\n"
            "Generator: ctxbox packaging/binary_wheel.py\n"
            "Root-Is-Purelib: false\n"
            + "".join(f"Tag: py3-none-{tag}\n" for tag in platform_tag.split("."))).encode(), 0o644),
    ]
    wheel_path = os.path.join(outdir, f"{NAME}-{version}-py3-none-{platform_tag}.whl")
    record = [_record_line(path, data) for path, data, _ in files] + [f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    with zipfile.ZipFile(wheel_path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for path, data, mode in files:
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return wheel_path


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    print(build(*sys.argv[1:]))
