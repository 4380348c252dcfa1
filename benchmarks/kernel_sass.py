"""What the compiler made of the CUDA kernels' inner loops, measured without a GPU.

Compiles a kernel file with `nvcc -cubin -arch=sm_90`, disassembles it with `cuobjdump -sass`
and, for every kernel, reports its registers and stack and, for each innermost loop, its
global loads (LDG: how many a thread has in flight per trip, which is what a memory-bound
kernel lives on) and its fused multiply-adds (FFMA) per shared-memory load instruction (LDS of
any width), per 32-bit word loaded and per shared-memory cycle. An SM issues 4 warp FFMAs per
clock but serves one 128-byte shared-memory wavefront per clock, so a float32 SIMT matmul loop
with fewer than about 4 FFMA per shared-memory cycle waits on shared memory. A warp's LDS.128
moves 512 bytes when its lanes read 32 distinct addresses, 256 (2 cycles) when they read 16
distinct rows, one wavefront when they read 2 (a broadcast): the machine code does not say
which, so the cycle column counts every LDS.128 as 2 cycles and every narrower LDS as 1, a
pessimistic figure for loops whose vector loads broadcast (docs/kernels.md counts each flash
loop from its access pattern). Nothing here was timed on a GPU.

    python benchmarks/kernel_sass.py [flash.cu] [--filter f32]

Needs nvcc, cuobjdump and nvdisasm: they come with the CUDA toolkit, or from PyPI
(`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`, under site-packages/nvidia/*/bin).
"""

import argparse
import glob
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile

KERNELS = os.path.join(os.path.dirname(__file__), "..", "tinyattn", "backends", "kernels")
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)([^;]*);")
WORDS = {"LDS": 1, "LDS.U8": 1, "LDS.64": 2, "LDS.128": 4}


def find_cuobjdump():
    found = shutil.which("cuobjdump")
    if found:
        return found
    for root in site.getsitepackages() + [site.getusersitepackages()]:
        hits = sorted(glob.glob(os.path.join(root, "nvidia", "*", "bin", "cuobjdump")))
        if hits:
            return hits[-1]
    sys.exit("kernel_sass: cuobjdump not found; install the CUDA toolkit or "
             "`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`")


def functions(sass):
    """{kernel name: [(address, opcode, operands)]} from cuobjdump -sass text."""
    out = {}
    for m in re.finditer(r"Function : (\S+)\n(.*?)(?=\n\s*Function :|\Z)", sass, re.S):
        out[m.group(1)] = [(int(a, 16), op, rest) for a, _, op, rest in LINE.findall(m.group(2))]
    return out


def innermost_loops(code):
    """(start, end) address ranges closed by a backward branch and holding no other loop."""
    loops = []
    for addr, op, rest in code:
        if op.startswith("BRA"):
            target = re.search(r"0x([0-9a-f]+)", rest)
            if target and int(target.group(1), 16) <= addr:
                loops.append((int(target.group(1), 16), addr))
    return [(a, b) for a, b in loops
            if not any((c, d) != (a, b) and a <= c and d <= b for c, d in loops)]


def mix(code, lo, hi):
    ffma = lds = words = ldg = cycles = 0
    for addr, op, _ in code:
        if lo <= addr <= hi:
            ffma += op.startswith("FFMA")
            ldg += op.startswith("LDG")
            if op.split(".")[0] == "LDS":
                lds += 1
                words += WORDS.get(op, 1)
                cycles += 2 if op == "LDS.128" else 1
    return ffma, lds, words, ldg, cycles


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", default="flash.cu", help="a file in kernels/")
    ap.add_argument("--filter", default="", help="only kernels whose name contains this")
    args = ap.parse_args(argv)
    src = os.path.join(KERNELS, args.file)
    if not os.path.exists(src):
        sys.exit(f"kernel_sass: no {src}")
    if shutil.which("nvcc") is None:
        sys.exit("kernel_sass: nvcc not found (the CUDA toolkit)")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", cubin, src], check=True)
        tool = find_cuobjdump()
        env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ["PATH"])
        sass, res = (subprocess.run([tool, flag, cubin], check=True, capture_output=True,
                                    text=True, env=env).stdout for flag in ("-sass", "-res-usage"))
    usage = dict(re.findall(r"Function (\S+):\s*\n?\s*(REG:\d+ STACK:\d+)", res))
    print(f"{args.file}, sm_90. Per innermost loop: global loads, FFMA, shared loads (LDS "
          f"instructions, 32-bit words), FFMA per LDS, per word and per shared-memory cycle "
          f"(LDS.128 counted as 2 cycles, others 1).")
    for name, code in sorted(functions(sass).items()):
        if args.filter not in name:
            continue
        print(f"{name}  {usage.get(name, '')}")
        for lo, hi in innermost_loops(code):
            ffma, lds, words, ldg, cycles = mix(code, lo, hi)
            if not (ffma or lds or ldg):
                continue
            line = (f"  loop {lo:#06x}-{hi:#06x}: {ldg:3d} LDG {ffma:4d} FFMA {lds:3d} LDS "
                    f"{words:4d} words")
            if lds:
                line += (f"  {ffma / lds:5.1f} per LDS  {ffma / words:4.1f} per word  "
                         f"{ffma / cycles:4.1f} per smem cycle")
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
