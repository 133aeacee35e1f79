"""FLOP and byte formulas, one small function per op, in a registry open to extension.

A formula receives an :class:`OpCall` (the call's ``Input Dims``, ``Input type`` and
``Concrete Inputs``) and returns ``(flops, bytes)``; None when the shapes it needs
are missing. Matrix products use 2·M·N·K. Bytes are inputs read + outputs written,
by dtype size. Register your own::

    from nongemm_trace.flops.formulas import formula

    @formula("mylib::fused_mlp")
    def _(call):
        (m, k), (_, n) = call.dims[0], call.dims[1]
        return 2 * m * n * k, call.bytes_in() + m * n * call.dtype_size(0)

Ops named by no formula fall back, by their category, to element-wise or
reduction estimates (bytes only, a few FLOPs per element); ops with neither are
counted and listed as having no formula.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

DTYPE_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "long": 8, "int": 4,
    "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8,
    "c10::complex<double>": 16, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1, "c10::Float8_e8m0fnu": 1, "c10::qint8": 1, "c10::quint8": 1, "c10::qint32": 4,
    "c10::Float4_e2m1fn_x2": 1,
}
#: torch ScalarType codes (Concrete Inputs dtype arguments) -> bytes
DTYPE_CODE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 12: 1, 13: 1, 14: 4, 15: 2,
                    23: 1, 24: 1, 25: 1, 26: 1, 44: 1, 45: 1}


@dataclass
class OpCall:
    name: str
    dims: list
    types: list
    concrete: list

    @classmethod
    def parse(cls, name: str, dims: str | None, types: str | None, concrete: str | None) -> OpCall:
        def load(s):
            if not s:
                return []
            try:
                v = json.loads(s)
                return v if isinstance(v, list) else []
            except ValueError:
                return []
        return cls(name, load(dims), load(types), load(concrete))

    def shape(self, i: int) -> list[int] | None:
        d = self.dims[i] if i < len(self.dims) else None
        if isinstance(d, list) and all(isinstance(x, int) for x in d):
            return d
        return None

    def dtype_size(self, i: int, default: int = 4) -> int:
        t = self.types[i] if i < len(self.types) else None
        return DTYPE_BYTES.get(t, default) if isinstance(t, str) else default

    def numel(self, i: int) -> int:
        s = self.shape(i)
        return math.prod(s) if s is not None else 0

    def tensor_inputs(self) -> list[int]:
        """Indices of the inputs that are tensors with a known shape (0-d tensors included;
        not scalars, scalar lists or absent arguments)."""
        out = []
        for i, d in enumerate(self.dims):
            t = self.types[i] if i < len(self.types) else ""
            if not isinstance(t, str) or t in ("", "Scalar", "ScalarList", "TensorList", "GenericList"):
                continue
            if isinstance(d, list) and all(isinstance(x, int) for x in d):
                out.append(i)
        return out

    def list_numel(self, i: int) -> int:
        """Elements of a TensorList argument (``Input Dims`` [[...], [...]])."""
        d = self.dims[i] if i < len(self.dims) else None
        if not isinstance(d, list):
            return 0
        return sum(math.prod(x) for x in d if isinstance(x, list) and all(isinstance(v, int) for v in x))

    def bytes_in(self) -> int:
        total = sum(self.numel(i) * self.dtype_size(i) for i in self.tensor_inputs())
        for i, t in enumerate(self.types):
            if t == "TensorList":
                total += self.list_numel(i) * 4  # element type is not recorded for lists
        return total

    def arg(self, i: int):
        """A concrete (scalar or list) argument, parsed: '[1, 1]' -> [1, 1], '2' -> 2, 'False' -> False."""
        if i >= len(self.concrete):
            return None
        s = self.concrete[i]
        if not isinstance(s, str) or s == "":
            return None
        if s in ("True", "False"):
            return s == "True"
        try:
            return json.loads(s)
        except ValueError:
            try:
                return float(s)
            except ValueError:
                return s


Formula = Callable[[OpCall], "tuple[int, int] | None"]
FORMULAS: dict[str, Formula] = {}
#: ops whose formula counts only when no op inside them has one (they decompose)
COMPOSITE: set[str] = set()


def formula(*names: str, composite: bool = False):
    """Register a formula for op names (base names match any namespace, as in taxonomies)."""
    def deco(fn: Formula) -> Formula:
        for n in names:
            FORMULAS[n] = fn
            if composite:
                COMPOSITE.add(n)
        return fn
    return deco


def lookup(name: str) -> Formula | None:
    return FORMULAS.get(name) or FORMULAS.get(name.rsplit("::", 1)[-1])


def is_composite(name: str) -> bool:
    return name in COMPOSITE or name.rsplit("::", 1)[-1] in COMPOSITE


def _mm(m: int, k: int, n: int, call: OpCall, a: int, b: int, extra_in: int = 0, batch: int = 1):
    size = call.dtype_size(a)
    return (2 * batch * m * n * k,
            batch * (m * k * call.dtype_size(a) + k * n * call.dtype_size(b) + m * n * size) + extra_in)


@formula("mm")
def _f_mm(c: OpCall):
    a, b = c.shape(0), c.shape(1)
    if not a or not b or len(a) != 2 or len(b) != 2:
        return None
    return _mm(a[0], a[1], b[1], c, 0, 1)


@formula("addmm", "_addmm_activation")
def _f_addmm(c: OpCall):
    a, b = c.shape(1), c.shape(2)
    if not a or not b or len(a) != 2 or len(b) != 2:
        return None
    return _mm(a[0], a[1], b[1], c, 1, 2, extra_in=c.numel(0) * c.dtype_size(0))


@formula("bmm")
def _f_bmm(c: OpCall):
    a, b = c.shape(0), c.shape(1)
    if not a or not b or len(a) != 3 or len(b) != 3:
        return None
    return _mm(a[1], a[2], b[2], c, 0, 1, batch=a[0])


@formula("baddbmm")
def _f_baddbmm(c: OpCall):
    a, b = c.shape(1), c.shape(2)
    if not a or not b or len(a) != 3 or len(b) != 3:
        return None
    return _mm(a[1], a[2], b[2], c, 1, 2, extra_in=c.numel(0) * c.dtype_size(0), batch=a[0])


@formula("_scaled_mm")
def _f_scaled_mm(c: OpCall):
    a, b = c.shape(0), c.shape(1)
    if not a or not b or len(a) != 2 or len(b) != 2:
        return None
    out_size = 2  # bf16/fp16 output (the usual out_dtype)
    return 2 * a[0] * a[1] * b[1], (a[0] * a[1] * c.dtype_size(0, 1) + a[1] * b[1] * c.dtype_size(1, 1)
                                    + a[0] * b[1] * out_size)


@formula("matmul", "linear", composite=True)
def _f_matmul(c: OpCall):
    a, b = c.shape(0), c.shape(1)
    if not a or not b:
        return None
    if c.name.endswith("linear"):  # weight is [N, K]
        k, n = b[-1], b[0]
    else:
        k, n = (b[-2], b[-1]) if len(b) >= 2 else (b[0], 1)
    rows = math.prod(a[:-1]) if len(a) > 1 else 1
    return 2 * rows * k * n, (rows * k + k * n + rows * n) * c.dtype_size(0)


def _conv(c: OpCall, stride_i: int, pad_i: int, dil_i: int, groups_i: int, transposed: bool | None = None,
          transposed_i: int | None = None):
    x, w = c.shape(0), c.shape(1)
    if not x or not w or len(x) < 3 or len(w) != len(x):
        return None
    nsp = len(x) - 2
    stride, pad, dil = c.arg(stride_i), c.arg(pad_i), c.arg(dil_i)
    groups = c.arg(groups_i) or 1
    if transposed is None:
        transposed = bool(c.arg(transposed_i)) if transposed_i is not None else False

    def vec(v, default):
        if v is None or isinstance(v, str):
            return [default] * nsp
        if isinstance(v, (int, float)):
            return [int(v)] * nsp
        v = [int(t) for t in v]
        return v * nsp if len(v) == 1 else v
    stride, pad, dil = vec(stride, 1), vec(pad, 0), vec(dil, 1)
    if not isinstance(groups, int) or groups < 1 or any(st < 1 for st in stride):
        return None  # arguments that are not a convolution's (another signature, a bad file)
    n, cin, spatial = x[0], x[1], x[2:]
    kernel = w[2:]
    if transposed:
        cout = w[1] * groups
        out = [(s - 1) * st - 2 * p + d * (k - 1) + 1 for s, st, p, d, k in zip(spatial, stride, pad, dil, kernel)]
        flops = 2 * n * cin * math.prod(spatial) * (cout // groups) * math.prod(kernel)
    else:
        cout = w[0]
        out = [(s + 2 * p - d * (k - 1) - 1) // st + 1 for s, st, p, d, k in zip(spatial, stride, pad, dil, kernel)]
        flops = 2 * n * cout * math.prod(out) * (cin // groups) * math.prod(kernel)
    size = c.dtype_size(0)
    nbytes = (math.prod(x) + math.prod(w) + n * cout * math.prod(out)) * size
    return flops, nbytes


@formula("conv1d", "conv2d", "conv3d", composite=True)
def _f_convnd(c: OpCall):  # (input, weight, bias, stride, padding, dilation, groups)
    return _conv(c, 3, 4, 5, 6, transposed=False)


@formula("convolution", "_convolution", composite=True)
def _f_convolution(c: OpCall):  # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return _conv(c, 3, 4, 5, 8, transposed_i=6)


@formula("cudnn_convolution")
def _f_cudnn_conv(c: OpCall):  # (input, weight, padding, stride, dilation, groups, benchmark, deterministic, tf32)
    return _conv(c, 3, 2, 4, 5, transposed=False)


@formula("miopen_convolution")
def _f_miopen_conv(c: OpCall):  # (input, weight, bias, padding, stride, dilation, groups, benchmark, deterministic)
    return _conv(c, 4, 3, 5, 6, transposed=False)


@formula("cudnn_convolution_transpose")
def _f_cudnn_conv_t(c: OpCall):  # (input, weight, padding, output_padding, stride, dilation, groups, ...)
    return _conv(c, 4, 2, 5, 6, transposed=True)


def _attention_work(c: OpCall, first: int, causal_i: int | None, factor: int, passes: int):
    """Attention with q, k, v at inputs ``first``..``first+2`` ([B, H, L, E] layout):
    ``factor`` x (B·H·L·S·E + B·H·L·S·Ev) FLOPs (2 for the forward's two products, 5 for the
    backward's recompute + four products), halved when causal; ``passes`` x the tensors' bytes."""
    q, k, v = c.shape(first), c.shape(first + 1), c.shape(first + 2)
    if not q or not k or not v or len(q) != 4:
        return None
    b, h, lq, e = q
    s, ev = k[-2], v[-1]
    flops = factor * b * h * lq * s * e + factor * b * h * lq * s * ev
    if causal_i is not None and c.arg(causal_i) is True and lq == s:
        flops //= 2  # only the lower triangle of the score matrix is computed
    size = c.dtype_size(first)
    return flops, passes * (math.prod(q) + math.prod(k) + math.prod(v) + b * h * lq * ev) * size


def _attention(c: OpCall, causal_i: int | None):
    return _attention_work(c, 0, causal_i, 2, 1)


@formula("scaled_dot_product_attention", composite=True)
def _f_sdpa(c: OpCall):  # (q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    return _attention(c, 5)


@formula("_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention")
def _f_sdpa_eff(c: OpCall):  # (q, k, v, attn_bias, compute_log_sumexp, dropout_p, is_causal, ...)
    return _attention(c, 6)


@formula("_scaled_dot_product_flash_attention")
def _f_sdpa_flash(c: OpCall):  # (q, k, v, dropout_p, is_causal, return_debug_mask, scale)
    return _attention(c, 4)


def _attention_backward(c: OpCall, causal_i: int | None):
    """Backward recomputes the scores and runs four more products: 2.5x the forward FLOPs."""
    return _attention_work(c, 1, causal_i, 5, 2)


@formula("_scaled_dot_product_efficient_attention_backward")
def _f_sdpa_eff_bwd(c: OpCall):
    # (grad_out, q, k, v, attn_bias, out, logsumexp, seed, offset, dropout_p, mask, is_causal, scale)
    return _attention_backward(c, 11)


@formula("_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_cudnn_attention_backward")
def _f_sdpa_flash_bwd(c: OpCall):
    # (grad_out, q, k, v, out, logsumexp, cum_q, cum_k, max_q, max_k, dropout_p, is_causal, …)
    return _attention_backward(c, 11)


# -- estimates for non-GEMM ops, by category (bytes moved, a few FLOPs per element) ----------

#: FLOPs per output element for categories whose ops have no formula of their own
FLOPS_PER_ELEMENT = {"arithmetic": 1, "activation": 4, "normalization": 5, "logit": 5, "pooling": 1,
                     "interpolation": 4, "qdq": 2, "memory": 0, "embedding": 0, "roi": 4, "other": 1}
_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "norm", "linalg_vector_norm", "var", "std", "var_mean",
               "std_mean", "prod", "argmax", "argmin", "all", "any", "logsumexp", "aminmax"}


_GATHERS = {"gather": 2, "index_select": 2, "embedding": 1, "take": 1, "index": 1, "nll_loss_forward": 1,
            "nll_loss2d_forward": 1}
_WRITE_ONLY = {"fill_", "zero_", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "normal_",
               "uniform_", "random_", "bernoulli_", "arange"}


def category_estimate(c: OpCall, category: str) -> tuple[int, int] | None:
    """Bytes read + written and FLOPs for an op of ``category`` with no formula of its own."""
    base = c.name.rsplit("::", 1)[-1]
    if base in ("cat", "stack", "_cat") and c.types[:1] == ["TensorList"]:
        n = c.list_numel(0)
        return (0, 2 * n * 4) if n else None
    lists = [i for i, t in enumerate(c.types) if t == "TensorList"]
    if lists:  # _foreach_* and fused optimizers: each list read, the first written
        n_first = c.list_numel(lists[0])
        n_all = sum(c.list_numel(i) for i in lists)
        if n_all:
            return FLOPS_PER_ELEMENT.get(category, 1) * n_first, 4 * (n_all + n_first)
    idx = c.tensor_inputs()
    if not idx:
        return None
    if base in _GATHERS:  # reads the gathered rows (not the whole table) and the indices
        src, ind = 0, _GATHERS[base]
        shape, ishape = c.shape(src), c.shape(ind)
        if shape is not None and ishape is not None:
            row = math.prod(shape[1:]) if base == "embedding" else 1
            if base == "index_select" and isinstance(c.arg(1), int) and shape:
                row = math.prod(shape) // max(1, shape[c.arg(1) % len(shape)])
            out = math.prod(ishape) * row
            return 0, 2 * out * c.dtype_size(src) + math.prod(ishape) * c.dtype_size(ind, 8)
    biggest = max(idx, key=c.numel)
    n_out = c.numel(biggest)
    out_size = c.dtype_size(biggest)
    if base in _REDUCTIONS:
        dims = c.arg(1)
        shape = c.shape(biggest) or []
        if isinstance(dims, list) and dims and shape:
            keep = [d for i, d in enumerate(shape) if i not in {x % len(shape) for x in dims if isinstance(x, int)}]
            n_out = math.prod(keep) if keep else 1
        else:
            n_out = 1
    elif base in ("to", "_to_copy"):
        code = c.arg(1)
        if isinstance(code, int):
            out_size = DTYPE_CODE_BYTES.get(code, out_size)
    elif base == "copy_":  # (dst, src): read src, write dst
        return 0, c.numel(1) * c.dtype_size(1) + c.numel(0) * c.dtype_size(0)
    if base in _WRITE_ONLY:
        return 0, n_out * out_size
    reads = c.bytes_in()
    flops = FLOPS_PER_ELEMENT.get(category, 0) * max(n_out, c.numel(biggest) if base in _REDUCTIONS else n_out)
    return flops, reads + n_out * out_size
