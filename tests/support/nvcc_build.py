"""nvcc, run at most once per (kernel file, architecture) in a test session.

Compiling flash.cu takes nvcc about 12 s on 2 cores, nearly all of it before PTX exists (ptxas
then needs a fraction of a second). Three checks need that compile: that the file compiles with
the options CuPy's NVRTC gets (tests/backends/test_kernels.py), the PTX's kernel parameter types
(tests/backends/test_cupy_backend.py's launch checks) and ptxas's register and spill report. One
`nvcc -cubin -Xptxas -v --keep` gives all three: the kept PTX and ptxas's lines in the log.
"""

import dataclasses
import functools
import pathlib
import shutil
import subprocess
import tempfile

from tinyattn.backends import cuda_launch as cl

NVCC = shutil.which("nvcc")
# nvcc spelling of the options NVRTC gets (CupyBackend's NVRTC_OPTIONS plus CuPy's -ftz=true)
NVCC_OPTIONS = [o.replace("--std=", "-std=") for o in cl.NVRTC_OPTIONS] + ["-ftz=true"]


@dataclasses.dataclass(frozen=True)
class Build:
    command: str  # the nvcc command line, for failure messages
    returncode: int
    log: str  # nvcc's stdout and stderr: errors, warnings, ptxas's -v report
    ptx: str  # the PTX nvcc made on the way ("" if it failed before)


@functools.cache
def build(filename, arch):
    """`filename` (a file of backends/kernels, as CupyBackend reads it) compiled for `arch`
    (sm_80, sm_90) to a cubin, with ptxas's report and the PTX kept."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="tinyattn-nvcc-"))
    try:
        src = folder / filename
        src.write_text(cl.kernel_source(filename))
        cmd = [NVCC, "-cubin", f"-arch={arch}", *NVCC_OPTIONS, "-Xptxas", "-v", "--keep",
               "--keep-dir", str(folder), str(src), "-o", str(folder / "out.cubin")]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
        ptx = src.with_suffix(".ptx")
        return Build(" ".join(cmd), done.returncode, done.stdout + done.stderr,
                     ptx.read_text() if ptx.exists() else "")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
