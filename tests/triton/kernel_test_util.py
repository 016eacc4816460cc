"""Shared by the interpreter tests of src/kernels/triton: Triton's interpreter on, the kernels'
folder importable, and one comparison that says where two tensors differ most.

The interpreter (TRITON_INTERPRET=1, set here before triton is imported) runs every program of a
launch in NumPy on CPU tensors: the kernels' own code, the same source the build compiles ahead of
time for the GPU, checked without one.
"""
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "kernels", "triton"))

import torch  # noqa: E402

try:
    from triton.runtime import interpreter as _interpreter  # noqa: E402
except ImportError as e:  # a Python without triton (a CPU-only torch wheel does not bring it)
    print(f"SKIPPED: no triton in {sys.executable} ({e}); scripts/setup.sh's venv has it")
    sys.exit(77)

torch.manual_seed(0)

# Triton 3.6's interpreter turns a runtime scalar into an int with int(ndarray of shape (1,)), which
# NumPy >= 2.4 refuses ("only 0-dimensional arrays can be converted to Python scalars"), so a loop
# `for i in range(n)` over a kernel argument fails under the interpreter only. Upstream's fix
# (triton-lang/triton#9171, PR #9172: squeeze first) applied here until the pinned triton has it.
if hasattr(_interpreter, "_patch_lang_tensor"):
    _patch_lang_tensor = _interpreter._patch_lang_tensor

    def _patch_with_scalar_index(tensor, scope):
        _patch_lang_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    _interpreter._patch_lang_tensor = _patch_with_scalar_index


def assert_close(test, name, got, want, atol, rtol):
    """got within atol + rtol * |want| of want, element-wise; the message names the worst element."""
    got, want = got.double(), want.double()
    test.assertEqual(got.shape, want.shape, f"{name}: shape")
    excess = (got - want).abs() - (atol + rtol * want.abs())
    worst = int(excess.flatten().argmax())
    test.assertLessEqual(float(excess.flatten()[worst]), 0.0,
                         f"{name}: element {worst} is {float(got.flatten()[worst]):.6g}, the reference "
                         f"{float(want.flatten()[worst]):.6g} (atol {atol}, rtol {rtol}); "
                         f"max |diff| {float((got - want).abs().max()):.3g}")


def rng_state(seed, offset):
    """The (seed, offset) int64 scalars the dropout kernels read from memory, as two tensors."""
    return torch.tensor([seed], dtype=torch.int64), torch.tensor([offset], dtype=torch.int64)
