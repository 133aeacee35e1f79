"""FLOPs vs latency: how well do FLOPs predict the time of GEMM and convolution calls?

Three models, each fitted on part of the distinct shapes and scored (MAPE) on the
held-out shapes, so a model is judged on shapes it has not seen:

* ``linear``: t = a + b·F
* ``flops_proportional``: t = b·F
* ``alpha_flops`` (Asperti et al., arXiv 2107.11949): t = a + c·α_K(S)·F with
  α_K(S) = ((S_K + β·(S − S_K)) / S)^γ, S_K = ln K + 1, S the output's spatial size
  (H·W for a convolution, the M rows for a GEMM) and K the kernel area (1 for a
  GEMM); β ∈ [0, 1] and γ ∈ [0, 2] by grid search.

Plain least squares on relative error (each call weighted by 1/t), so small and
large calls count alike. Numbers only from numpy-free Python on a few hundred
points (the distinct shapes), fast enough everywhere.
"""

from __future__ import annotations

import math
from typing import Any


def _lstsq_rel(xs: list[list[float]], ys: list[float]) -> list[float] | None:
    """Solve min Σ ((Σ_j c_j x_ij - y_i) / y_i)^2 via the normal equations (2 unknowns at most)."""
    n = len(xs[0])
    a = [[0.0] * n for _ in range(n)]
    b = [0.0] * n
    for x, y in zip(xs, ys):
        w = 1.0 / (y * y) if y else 0.0
        for i in range(n):
            b[i] += w * x[i] * y
            for j in range(n):
                a[i][j] += w * x[i] * x[j]
    if n == 1:
        return [b[0] / a[0][0]] if a[0][0] else None
    det = a[0][0] * a[1][1] - a[0][1] * a[1][0]
    if abs(det) < 1e-300:
        return None
    return [(b[0] * a[1][1] - a[0][1] * b[1]) / det, (a[0][0] * b[1] - a[1][0] * b[0]) / det]


def _mape(pred: list[float], ys: list[float]) -> float:
    return sum(abs(p - y) / y for p, y in zip(pred, ys) if y) / max(1, len(ys))


def alpha(s: float, k: float, beta: float, gamma: float) -> float:
    sk = math.log(k) + 1.0
    s = max(s, 1.0)
    return ((sk + beta * (s - sk)) / s) ** gamma


def fit_models(points: list[dict[str, Any]], holdout_every: int = 4) -> dict[str, Any]:
    """``points``: per distinct shape ``{flops, time_ns, S, K, calls}`` (time = mean per call).
    Shapes sorted by FLOPs; every ``holdout_every``-th one is held out for scoring."""
    pts = sorted((p for p in points if p["time_ns"] > 0 and p["flops"] > 0),
                 key=lambda p: (p["flops"], p["time_ns"], p["S"], p["K"], p["calls"]))
    out: dict[str, Any] = {"distinct_shapes": len(pts), "calls": sum(p["calls"] for p in pts)}
    if len(pts) < 4:
        out["models"] = {}
        out["note"] = "fewer than 4 distinct GEMM/convolution shapes: no fit"
        return out
    test = pts[holdout_every - 1::holdout_every]
    train = [p for i, p in enumerate(pts) if (i + 1) % holdout_every]
    ty = [p["time_ns"] for p in train]
    vy = [p["time_ns"] for p in test]
    models: dict[str, Any] = {}

    c = _lstsq_rel([[1.0, p["flops"]] for p in train], ty)
    if c:
        models["linear"] = {"a_ns": c[0], "ns_per_flop": c[1],
                            "mape": _mape([c[0] + c[1] * p["flops"] for p in test], vy),
                            "train_mape": _mape([c[0] + c[1] * p["flops"] for p in train], ty)}
    c = _lstsq_rel([[p["flops"]] for p in train], ty)
    if c:
        models["flops_proportional"] = {"ns_per_flop": c[0],
                                        "mape": _mape([c[0] * p["flops"] for p in test], vy),
                                        "train_mape": _mape([c[0] * p["flops"] for p in train], ty)}
    best = None
    for bi in range(0, 21):
        beta = bi / 20
        for gi in range(0, 41):
            gamma = gi / 20
            xs = [[1.0, alpha(p["S"], p["K"], beta, gamma) * p["flops"]] for p in train]
            c = _lstsq_rel(xs, ty)
            if not c:
                continue
            err = _mape([c[0] + c[1] * x[1] for x in xs], ty)
            if best is None or err < best[0]:
                best = (err, beta, gamma, c)
    if best:
        err, beta, gamma, c = best
        pred = [c[0] + c[1] * alpha(p["S"], p["K"], beta, gamma) * p["flops"] for p in test]
        models["alpha_flops"] = {"a_ns": c[0], "ns_per_alpha_flop": c[1], "beta": beta, "gamma": gamma,
                                 "mape": _mape(pred, vy), "train_mape": err}
    for m in models.values():
        for k, v in list(m.items()):
            if isinstance(v, float):
                m[k] = round(v, 6) if abs(v) >= 1e-3 else float(f"{v:.6g}")
    out["models"] = models
    out["train_shapes"], out["test_shapes"] = len(train), len(test)
    return out
