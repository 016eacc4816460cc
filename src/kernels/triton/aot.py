#!/usr/bin/env python3
"""Ahead-of-time compiler of the fused kernels (issue 38): Triton sources -> cubins -> C++ files.

    aot.py --out DIR [--targets 90 80] [--jobs N] MODULE...    compile, write DIR/triton_images.cpp and
                                                               DIR/triton_launchers.h
    aot.py --check                                             can this Python compile for sm_90? (exit 0/1)

Each MODULE (layer_norm, ...: files next to this one) lists its compiled variants in
aot_variants(): (kernel, variant name, signature, constexprs, num_warps). Every variant is compiled
for every target architecture (sm_90 runs on H100/H200, sm_80 on A100 and, being forward compatible
within a major version, on sm_86/sm_89) by triton.compile with an explicit GPUTarget, which needs no
GPU and no driver: what triton/tools/compile.py does, minus its two traps here. compile.py asks the
active driver (absent without a GPU: "0 active drivers") for the target and the C types, and its
C launcher declares fp32 arguments as double, which the kernel then reads as a corrupted float.
Here no driver is touched, and the launcher is our own C++ (src/kernels/triton_runtime.cpp), which
passes each argument at the width the kernel's PTX declares (fp32 as a 4-byte float).

The output embeds each cubin with `.incbin` (DIR/cubin/*.cubin, no 1-MB string literals for the
compiler to parse) and records, per image: kernel, variant, architecture, warps, shared memory and
the runtime signature (the non-constexpr parameters' types) and which of them were compiled as 16-byte
aligned or multiples of 16 (":16"), which the C++ launcher checks its arguments against. The sha256 of each cubin is written next to it, so the C++ file's text changes
whenever a cubin does (ccache keys on that text, not on .incbin'd files).

It also writes one typed launcher per kernel (DIR/triton_launchers.h, issue 52): a struct named
after the Triton function whose args() takes the kernel's runtime parameters by name, each typed by
its kind (a pointer: PtrArg, i32: I32Arg, i64: I64Arg, fp32: F32Arg; src/kernels/triton_runtime.h),
and returns them as KernelArgs. A kernel whose parameters change no longer matches its call sites,
which then fail to compile, not to launch; the variants' pointer dtypes are still checked at launch.

Triton's cache (TRITON_CACHE_DIR, default ~/.triton/cache) makes an unchanged kernel free to
rebuild. Line info is left out (cubins 3x smaller); --line-info keeps it for compute-sanitizer.
"""
import argparse
import concurrent.futures
import hashlib
import importlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def compile_one(job):
    """(module, index of the variant, arch) -> (image record, cubin bytes). Runs in a worker."""
    module_name, index, arch, line_info = job
    if not line_info:
        os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
    sys.path.insert(0, HERE)
    import triton
    from triton.backends.compiler import GPUTarget
    kernel, variant, signature, constexprs, num_warps = importlib.import_module(module_name).aot_variants()[index]
    params = [p for p in kernel.arg_names if p not in constexprs]
    if len(params) != len(signature):
        raise SystemExit(f"{module_name}.{kernel.__name__}/{variant}: {len(signature)} types for the "
                         f"{len(params)} runtime parameters {params}")
    types, attrs = {}, {}
    for name, spec in zip(params, signature):
        ty, _, hint = spec.partition(":")
        types[name] = ty
        if hint == "16":  # pointer 16-byte aligned / integer divisible by 16
            attrs[(kernel.arg_names.index(name),)] = [["tt.divisibility", 16]]
    for name in constexprs:
        types[name] = "constexpr"
    src = triton.compiler.ASTSource(fn=kernel, signature=types, constexprs=constexprs, attrs=attrs)
    target = GPUTarget("cuda", arch, 32)
    backend = triton.compiler.make_backend(target)
    options = backend.parse_options({"num_warps": num_warps, "num_stages": 3})
    compiled = triton.compile(src, target=target, options=options.__dict__)
    meta = compiled.metadata
    if getattr(meta, "global_scratch_size", 0) > 0 or getattr(meta, "profile_scratch_size", 0) > 0:
        raise SystemExit(f"{kernel.__name__}/{variant}: needs scratch memory, which the launcher does not provide")
    record = dict(kernel=kernel.__name__, variant=variant, arch=arch, num_warps=num_warps, shared=meta.shared,
                  entry=meta.name, signature=",".join(t.partition(":")[0] for t in signature),
                  divisible16="".join("1" if t.partition(":")[2] == "16" else "0" for t in signature))
    return record, compiled.asm["cubin"]


def jobs_of(modules, targets, line_info):
    sys.path.insert(0, HERE)
    jobs = []
    for module_name in modules:
        variants = importlib.import_module(module_name).aot_variants()
        jobs += [(module_name, i, arch, line_info) for arch in targets for i in range(len(variants))]
    return jobs


def write_cpp(out_dir, results, modules, seconds):
    cubin_dir = os.path.join(out_dir, "cubin")
    os.makedirs(cubin_dir, exist_ok=True)
    lines = [f"// Generated by src/kernels/triton/aot.py from {', '.join(m + '.py' for m in modules)} "
             f"({len(results)} images, {seconds:.0f} s); do not edit.",
             '#include "kernels/triton_runtime.h"', "", "namespace roformer::kernels {", ""]
    rows = []
    for i, (r, cubin) in enumerate(results):
        path = os.path.join(cubin_dir, f"{r['kernel']}.{r['variant']}.sm{r['arch']}.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        symbol = f"roformer_triton_image_{i}"
        lines += [f"// {os.path.basename(path)}: sha256 {hashlib.sha256(cubin).hexdigest()}",
                  f'extern "C" const unsigned char {symbol}[];',
                  f'__asm__(".section .rodata\\n.balign 16\\n.type {symbol}, @object\\n{symbol}:\\n'
                  f'.incbin \\"{path}\\"\\n.previous");']
        rows.append(f'    {{"{r["kernel"]}", "{r["variant"]}", {r["arch"]}, {r["num_warps"]}, {r["shared"]}, '
                    f'"{r["entry"]}", "{r["signature"]}", {symbol}, {len(cubin)}, "{r["divisible16"]}"}},')
    lines += ["", "std::vector<TritonImage> triton_images() {", "  return {"] + rows + ["  };", "}", "",
              "}  // namespace roformer::kernels", ""]
    with open(os.path.join(out_dir, "triton_images.cpp"), "w") as f:  # always: the build's output is newer
        f.write("\n".join(lines))


# The C++ type of a runtime parameter of each Triton kind (src/kernels/triton_runtime.h).
ARG_TYPES = {"i32": "I32Arg", "i64": "I64Arg", "fp32": "F32Arg"}
CXX_KEYWORDS = {"and", "auto", "bool", "char", "class", "default", "delete", "double", "float", "int", "long",
                "new", "not", "or", "register", "short", "signed", "template", "this", "union", "unsigned"}


def kernel_parameters(module_name):
    """{kernel name: (module, [(parameter, kind)])} of a module's compiled kernels, in the order of
    aot_variants; every variant of a kernel must agree on its parameters' kinds."""
    sys.path.insert(0, HERE)
    out = {}
    for kernel, variant, signature, constexprs, _ in importlib.import_module(module_name).aot_variants():
        params = [p for p in kernel.arg_names if p not in constexprs]
        kinds = ["ptr" if t.startswith("*") else t.partition(":")[0] for t in signature]
        unknown = [k for k in kinds if k != "ptr" and k not in ARG_TYPES]
        if unknown or len(params) != len(kinds):
            raise SystemExit(f"{module_name}.{kernel.__name__}/{variant}: cannot type {signature} for {params}")
        typed = list(zip(params, kinds))
        name = kernel.__name__
        if name in out and out[name][1] != typed:
            raise SystemExit(f"{module_name}.{name}/{variant}: its parameters' kinds differ from another variant's")
        out[name] = (module_name, typed)
    return out


def write_launchers(out_dir, modules):
    lines = [f"// Generated by src/kernels/triton/aot.py from {', '.join(m + '.py' for m in modules)}: one typed",
             "// launcher per kernel (its runtime parameters by name and kind); do not edit.",
             "#pragma once", "", '#include "kernels/triton_runtime.h"', "", "namespace roformer::kernels::triton {", ""]
    for module_name in modules:
        for name, (module, typed) in kernel_parameters(module_name).items():
            cxx = [(p + "_" if p in CXX_KEYWORDS else p, k) for p, k in typed]
            params = ", ".join(f"{'PtrArg' if k == 'ptr' else ARG_TYPES[k]} {p}" for p, k in cxx)
            body = "".join(f".arg({p})" for p, _ in cxx)
            lines += [f"// {name}({', '.join(p for p, _ in typed)}): src/kernels/triton/{module}.py",
                      f"struct {name} {{",
                      f'  static constexpr const char* kKernel = "{name}";',
                      f"  static KernelArgs args({params}) {{",
                      "    KernelArgs out;",
                      f"    out{body};",
                      "    return out;",
                      "  }",
                      "};", ""]
    lines += ["}  // namespace roformer::kernels::triton", ""]
    with open(os.path.join(out_dir, "triton_launchers.h"), "w") as f:  # always: the build's output is newer
        f.write("\n".join(lines))


def check():
    """Compiles one small kernel for sm_90 without touching a driver: the build's AUTO test."""
    os.environ["TRITON_DISABLE_LINE_INFO"] = "1"
    sys.path.insert(0, HERE)
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        import layer_norm
        src = triton.compiler.ASTSource(fn=layer_norm.dropout_keep_mask, constexprs={"BLOCK": 256},
                                        signature={"SEED": "*i64", "OFFSET": "*i64", "offset_add": "i64",
                                                   "KEEP": "*u8", "n": "i64", "p": "fp32", "BLOCK": "constexpr"})
        target = GPUTarget("cuda", 90, 32)
        options = triton.compiler.make_backend(target).parse_options({"num_warps": 4})
        cubin = triton.compile(src, target=target, options=options.__dict__).asm["cubin"]
    except Exception as e:  # any failure means: build without the kernels, and say why
        print(f"triton cannot compile for sm_90 here: {type(e).__name__}: {e}".splitlines()[0])
        return 1
    print(f"triton {triton.__version__} compiles for sm_90 ({len(cubin)}-byte test cubin)")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*")
    parser.add_argument("--out", help="folder for triton_images.cpp and cubin/")
    parser.add_argument("--targets", nargs="+", type=int, default=[90, 80])
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--line-info", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        return check()
    if not args.out or not args.modules:
        parser.error("--out and at least one module are required")
    start = time.time()
    jobs = jobs_of(args.modules, args.targets, args.line_info)
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(compile_one, jobs))
    seconds = time.time() - start
    write_cpp(args.out, results, args.modules, seconds)
    write_launchers(args.out, args.modules)
    size = sum(len(c) for _, c in results)
    print(f"aot.py: {len(results)} kernel images for sm_{', sm_'.join(map(str, args.targets))} "
          f"({size / 1e6:.1f} MB) in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
