#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes tests/golden/optim_golden.h: fixed inputs and PyTorch's outputs for ddpc's optimizers.

Run once with /usr/bin/python3 (PyTorch 1.13, CPU) and commit the header; the build never runs it.
Cases: torch.optim.SGD (momentum 0.9, nesterov, weight decay) and torch.optim.AdamW (weight decay
0.1 on a "weight" group, 0 on a "bias" group, which ddpc expresses as a decay mask), 5 steps each
with a different LR per step; and torch.nn.utils.clip_grad_norm_ over and under the max norm.
Every hyperparameter is rounded to fp32 first so that ddpc's float config holds the same value.
"""
import os
import sys

import numpy as np
import torch

STEPS = 5
N_SGD = 37          # not a multiple of 8/16: exercises torch's vector body and scalar tail
N_WEIGHT, N_BIAS = 24, 13


def f32(x):
    return float(np.float32(x))


def c_float(v):
    """A C float literal that round-trips the fp32 value v (9 significant digits suffice)."""
    if not np.isfinite(v):
        sys.exit(f"non-finite value {v}")
    text = f"{float(np.float32(v)):.9g}"
    if "." not in text and "e" not in text:
        text += ".0"
    return text + "f"


def c_rows(values, per_line, indent):
    items = [c_float(v) for v in np.asarray(values, dtype=np.float32).reshape(-1).tolist()]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return (",\n" + indent).join(lines)


def c_array(name, values, per_line=5):
    """A static const float array; a 2-D array gets one brace-enclosed initializer per row."""
    arr = np.asarray(values, dtype=np.float32)
    dims = "".join(f"[{d}]" for d in arr.shape)
    if arr.ndim == 1:
        body = c_rows(arr, per_line, "    ")
        return f"static const float {name}{dims} = {{\n    {body},\n}};\n"
    rows = [f"    {{\n        {c_rows(row, per_line, '        ')},\n    }}," for row in arr]
    return f"static const float {name}{dims} = {{\n" + "\n".join(rows) + "\n};\n"


def c_mask(name, values, per_line=24):
    items = [str(int(v)) for v in values]
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    body = ",\n    ".join(lines)
    return f"static const uint8_t {name}[{len(values)}] = {{\n    {body},\n}};\n"


def run_sgd(gen):
    cfg = dict(momentum=f32(0.9), dampening=0.0, nesterov=True, weight_decay=f32(0.01))
    lrs = [f32(x) for x in (0.05, 0.04, 0.03, 0.02, 0.01)]
    p0 = torch.randn(N_SGD, generator=gen)
    grads = torch.randn(STEPS, N_SGD, generator=gen)
    p = torch.nn.Parameter(p0.clone())
    opt = torch.optim.SGD([p], lr=lrs[0], foreach=False, **cfg)
    for s in range(STEPS):
        opt.param_groups[0]["lr"] = lrs[s]
        p.grad = grads[s].clone()
        opt.step()
    buf = opt.state[p]["momentum_buffer"]
    out = [f"/* torch.optim.SGD(lr=lrs[s], momentum={cfg['momentum']:.9g}, dampening=0,\n"
           f" * nesterov=True, weight_decay={cfg['weight_decay']:.9g}), one param group. */\n"]
    out.append(f"#define GOLDEN_SGD_N {N_SGD}\n")
    out.append(f"static const float golden_sgd_momentum = {c_float(cfg['momentum'])};\n")
    out.append(f"static const float golden_sgd_weight_decay = {c_float(cfg['weight_decay'])};\n")
    out.append(c_array("golden_sgd_lrs", lrs))
    out.append(c_array("golden_sgd_params0", p0.numpy()))
    out.append(c_array("golden_sgd_grads", grads.numpy()))
    out.append(c_array("golden_sgd_params", p.detach().numpy()))
    out.append(c_array("golden_sgd_momentum_buffer", buf.numpy()))
    return out


def run_adamw(gen):
    betas, eps, wd = (f32(0.9), f32(0.999)), f32(1e-8), f32(0.1)
    lrs = [f32(x) for x in (1e-2, 8e-3, 6e-3, 4e-3, 2e-3)]
    w0 = torch.randn(N_WEIGHT, generator=gen)
    b0 = torch.randn(N_BIAS, generator=gen)
    grads = torch.randn(STEPS, N_WEIGHT + N_BIAS, generator=gen) * 0.1
    w = torch.nn.Parameter(w0.clone())
    b = torch.nn.Parameter(b0.clone())
    opt = torch.optim.AdamW([{"params": [w], "weight_decay": wd},
                             {"params": [b], "weight_decay": 0.0}],
                            lr=lrs[0], betas=betas, eps=eps, foreach=False)
    for s in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = lrs[s]
        w.grad = grads[s, :N_WEIGHT].clone()
        b.grad = grads[s, N_WEIGHT:].clone()
        opt.step()
    cat = lambda key: torch.cat([opt.state[w][key], opt.state[b][key]]).numpy()
    assert int(opt.state[w]["step"].item()) == STEPS
    out = [f"/* torch.optim.AdamW(lr=lrs[s], betas=({betas[0]:.9g}, {betas[1]:.9g}),\n"
           f" * eps={eps:.9g})"
           f" with groups [weight ({N_WEIGHT}), weight_decay={wd:.9g}] and\n"
           f" * [bias ({N_BIAS}), weight_decay=0]; ddpc\n"
           f" * sees one buffer, weight ++ bias, with golden_adamw_decay_mask. */\n"]
    out.append(f"#define GOLDEN_ADAMW_N {N_WEIGHT + N_BIAS}\n")
    out.append(f"static const float golden_adamw_beta1 = {c_float(betas[0])};\n")
    out.append(f"static const float golden_adamw_beta2 = {c_float(betas[1])};\n")
    out.append(f"static const float golden_adamw_eps = {c_float(eps)};\n")
    out.append(f"static const float golden_adamw_weight_decay = {c_float(wd)};\n")
    out.append(c_mask("golden_adamw_decay_mask", [1] * N_WEIGHT + [0] * N_BIAS))
    out.append(c_array("golden_adamw_lrs", lrs))
    out.append(c_array("golden_adamw_params0", torch.cat([w0, b0]).numpy()))
    out.append(c_array("golden_adamw_grads", grads.numpy()))
    out.append(c_array("golden_adamw_params", torch.cat([w.detach(), b.detach()]).numpy()))
    out.append(c_array("golden_adamw_exp_avg", cat("exp_avg")))
    out.append(c_array("golden_adamw_exp_avg_sq", cat("exp_avg_sq")))
    return out


def run_clip(gen):
    g0 = torch.randn(N_SGD, generator=gen)
    out = ["/* torch.nn.utils.clip_grad_norm_(p, max_norm): returned norm and clipped grads. */\n"]
    for tag, max_norm in (("over", 1.5), ("under", 100.0)):
        p = torch.nn.Parameter(torch.zeros(N_SGD))
        p.grad = g0.clone()
        norm = torch.nn.utils.clip_grad_norm_([p], max_norm).item()
        out.append(f"static const float golden_clip_{tag}_max_norm = {c_float(max_norm)};\n")
        out.append(f"static const float golden_clip_{tag}_norm = {c_float(norm)};\n")
        out.append(c_array(f"golden_clip_{tag}_grads", p.grad.numpy()))
    out.insert(1, c_array("golden_clip_grads0", g0.numpy()))
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                               "optim_golden.h")
    gen = torch.Generator().manual_seed(20240611)
    parts = run_sgd(gen) + ["\n"] + run_adamw(gen) + ["\n"] + run_clip(gen)
    head = (
        "// SPDX-License-Identifier: MIT\n"
        f"/* PyTorch {torch.__version__} reference values for ddpc's optimizers and clipping,\n"
        " * generated by /usr/bin/python3 tests/golden/make_optim_golden.py;\n"
        " * do not edit, rerun the script. Tolerance: tests/test_optim_golden.c requires every\n"
        " * value within 1e-6 relative (absolute below magnitude 1). ddpc reproduces torch's fp32\n"
        " * op order, so on an IEEE machine the optimizer values should be bit-identical;\n"
        " * clipping may differ by an ulp: ddpc sums squares in double, torch in fp32. */\n"
        "#ifndef DDPC_TESTS_OPTIM_GOLDEN_H\n#define DDPC_TESTS_OPTIM_GOLDEN_H\n\n"
        "#include <stdint.h>\n\n"
        f"#define GOLDEN_STEPS {STEPS}\n\n")
    with open(path, "w") as f:
        f.write(head + "".join(parts) + "\n#endif\n")


if __name__ == "__main__":
    main()
