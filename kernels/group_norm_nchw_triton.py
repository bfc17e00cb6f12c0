"""GroupNorm of NCHW tensors (ONNX's GroupNormalization): each (image, group) is one contiguous span.

In NCHW a group's c_per_group channels of H*W values lie side by side, so the group is a flat span of
c_per_group * H*W values and channel `g * c_per_group + i // hw` owns value i of group g's span. Both
families read the span as flat blocks (16-byte vectors when H*W is a multiple of 16), sum x - s and
(x - s)^2 in fp32 per lane, s being the span's first value (a shift that keeps E[x^2] - E[x]^2 from
cancelling on groups whose mean is far from zero), then write (x - mean) * rstd * scale[ch] + bias[ch]
and, when ACTIVATION_SILU, SiLU of it. scale and bias are fp32 per channel: ONNX's opset-18 form (one
value per group) is the same op with each group's value repeated over its channels.

- `GroupNormNCHW_{Silu|Pass}_<dtype>`: one program per (image, group), grid (groups, n), two passes
  over the span in BLOCK steps (the second from L2 when the span was just read). Any shape: the
  correctness fallback.
- `GroupNormNCHWTeam_{Silu|Pass}_<dtype>`: a team of PARTS programs per (image, group), each a
  contiguous share of the span, sums added up through a 512-byte line of a zeroed workspace
  (kernels/_grid_sync.py `team_sums`), so the launch is cooperative: grid (PARTS, groups, n), every
  program resident. `ONE` kernels hold their share in registers (one read, one write); the others
  walk it twice. H*W a multiple of 16.

Arguments: in, out, scale, bias, (the team's workspace,) hw, c_per_group, eps. Output and input have the
same dtype; statistics are fp32.
"""

import triton
import triton.language as tl
from _grid_sync import team_sums

DTYPES = ("fp32", "fp16", "bf16")


@triton.jit
def _span_sums(input_ptr, base, shift, start, end, BLOCK: tl.constexpr):
    """Sums of x - shift and of its square over span values [start, end), in fp32 lanes."""
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    acc_sq = tl.zeros([BLOCK], tl.float32)
    for off in range(start, end, BLOCK):
        idx = off + lanes
        mask = idx < end
        x = tl.load(input_ptr + base + idx, mask=mask, other=0.0).to(tl.float32)
        x = tl.where(mask, x - shift, 0.0)
        acc += x
        acc_sq += x * x
    return tl.sum(acc, 0), tl.sum(acc_sq, 0)


@triton.jit
def _normalize(x, idx, mask, base, group, hw, c_per_group, mean, rstd, output_ptr, scale_ptr, bias_ptr,
               ACTIVATION_SILU: tl.constexpr):
    ch = group * c_per_group + idx // hw
    scale = tl.load(scale_ptr + ch, mask=mask, other=0.0)
    bias = tl.load(bias_ptr + ch, mask=mask, other=0.0)
    y = (x - mean) * rstd * scale + bias
    if ACTIVATION_SILU:
        y = y * tl.sigmoid(y)
    tl.store(output_ptr + base + idx, y.to(output_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _mean_rstd(total, total_sq, shift, count, eps):
    mean_shifted = total / count
    var = tl.maximum(total_sq / count - mean_shifted * mean_shifted, 0.0)
    return mean_shifted + shift, tl.rsqrt(var + eps)


@triton.jit
def group_norm_nchw_kernel(input_ptr, output_ptr, scale_ptr, bias_ptr, hw, c_per_group, eps,
                           BLOCK: tl.constexpr, ACTIVATION_SILU: tl.constexpr, HW16: tl.constexpr):
    # HW16 only selects the signature (hw specialised as a multiple of 16, so blocks load as vectors).
    group = tl.program_id(0)
    image = tl.program_id(1).to(tl.int64)
    span = c_per_group * hw
    base = (image * tl.num_programs(0) + group) * span
    shift = tl.load(input_ptr + base).to(tl.float32)
    total, total_sq = _span_sums(input_ptr, base, shift, 0, span, BLOCK)
    mean, rstd = _mean_rstd(total, total_sq, shift, span.to(tl.float32), eps)
    lanes = tl.arange(0, BLOCK)
    for off in range(0, span, BLOCK):
        idx = off + lanes
        mask = idx < span
        x = tl.load(input_ptr + base + idx, mask=mask, other=0.0).to(tl.float32)
        _normalize(x, idx, mask, base, group, hw, c_per_group, mean, rstd, output_ptr, scale_ptr, bias_ptr,
                   ACTIVATION_SILU)


@triton.jit
def group_norm_nchw_team_kernel(input_ptr, output_ptr, scale_ptr, bias_ptr, ws_ptr, hw, c_per_group, eps,
                                BLOCK: tl.constexpr, PARTS: tl.constexpr, ONE: tl.constexpr,
                                ACTIVATION_SILU: tl.constexpr):
    part = tl.program_id(0)
    group = tl.program_id(1)
    image = tl.program_id(2).to(tl.int64)
    span = c_per_group * hw
    base = (image * tl.num_programs(1) + group) * span
    # Shares are whole 16-value runs, so every member's vectors stay aligned.
    share = tl.cdiv(tl.cdiv(span, PARTS), 16) * 16
    start = part * share
    end = tl.minimum(start + share, span)
    shift = tl.load(input_ptr + base).to(tl.float32)
    lanes = tl.arange(0, BLOCK)
    if ONE:
        idx = start + lanes
        mask = idx < end
        x = tl.load(input_ptr + base + idx, mask=mask, other=0.0).to(tl.float32)
        xs = tl.where(mask, x - shift, 0.0)
        total, total_sq = tl.sum(xs, 0), tl.sum(xs * xs, 0)
    else:
        total, total_sq = _span_sums(input_ptr, base, shift, start, end, BLOCK)
    line = ws_ptr + (image * tl.num_programs(1) + group) * 128  # int32 words: 512 bytes per team
    total, total_sq = team_sums(line, part, total, total_sq, PARTS)
    mean, rstd = _mean_rstd(total, total_sq, shift, span.to(tl.float32), eps)
    if ONE:
        _normalize(x, idx, mask, base, group, hw, c_per_group, mean, rstd, output_ptr, scale_ptr, bias_ptr,
                   ACTIVATION_SILU)
    else:
        for off in range(start, end, BLOCK):
            idx = off + lanes
            mask = idx < end
            x = tl.load(input_ptr + base + idx, mask=mask, other=0.0).to(tl.float32)
            _normalize(x, idx, mask, base, group, hw, c_per_group, mean, rstd, output_ptr, scale_ptr, bias_ptr,
                       ACTIVATION_SILU)


# in, out, scale, bias, (ws,) hw, c_per_group, eps; `HW16` kernels take hw as a multiple of 16.
SIG = "*{t}:16,*{t}:16,*fp32:16,*fp32:16,i32{h},i32,fp32"
TEAM_SIG = "*{t}:16,*{t}:16,*fp32:16,*fp32:16,*i32:16,i32{h},i32,fp32"
SINGLE = [(1024, 4, 0), (4096, 8, 0), (1024, 4, 1), (4096, 8, 1)]  # (BLOCK, warps, HW16)
TEAM_PARTS = (2, 4, 8, 16)  # team_sums: a power of two, at most 28
TEAM_BLOCK, TEAM_WARPS = 4096, 8


def _entry(name, func, sig, dtype, hw16, warps, constants, group):
    return {"name": name, "group": group, "func": func, "sig": sig.format(t=dtype, h=":16" if hw16 else ""),
            "kwargs": {"num_warps": warps, "constants": constants}}


def get_function_table():
    table = []
    for silu in (True, False):
        act = "Silu" if silu else "Pass"
        for dt in DTYPES:
            group = f"GroupNormNCHW_{act}_{dt}"
            for block, warps, hw16 in SINGLE:
                name = f"{group}_b{block}_w{warps}{'_hw16' if hw16 else ''}"
                constants = {"BLOCK": block, "ACTIVATION_SILU": int(silu), "HW16": hw16}
                table.append(_entry(name, group_norm_nchw_kernel, SIG, dt, hw16, warps, constants, group))
            team = f"GroupNormNCHWTeam_{act}_{dt}"
            for parts in TEAM_PARTS:
                for one in (1, 0):
                    table.append(_entry(f"{team}_p{parts}_b{TEAM_BLOCK}{'_one' if one else ''}",
                                        group_norm_nchw_team_kernel, TEAM_SIG, dt, True, TEAM_WARPS,
                                        {"BLOCK": TEAM_BLOCK, "PARTS": parts, "ONE": one,
                                         "ACTIVATION_SILU": int(silu)}, team))
    return table


# scale and bias per channel have roles of their own: NHWC GroupNorm's `bias` is the skip's bias.
ROLES = ["in", "out", "nchw_scale", "nchw_bias", "hw", "c_per_group", "eps"]


def get_launch_contracts():
    single = {
        "params": ROLES,
        "grid": ["groups", "n", "1"],
        "requires": ["ACTIVATION_SILU == silu", "HW16 == 0 or hw % 16 == 0"],
        "fallback": True,
        "doc": "NCHW; one program per (image, group) walks its contiguous span twice in BLOCK steps; any shape",
    }
    team = {
        "params": [*ROLES[:4], "ws", *ROLES[4:]],
        "grid": ["PARTS", "groups", "n"],
        # a member's share fits its block (ONE) or needs more than one (walked twice); no part left empty
        "requires": ["ACTIVATION_SILU == silu", "hw % 16 == 0", "n * groups * PARTS <= resident",
                     "(ONE == 1 and cdiv(cdiv(c_per_group * hw, PARTS), 16) * 16 <= BLOCK) or "
                     "(ONE == 0 and cdiv(cdiv(c_per_group * hw, PARTS), 16) * 16 > BLOCK)",
                     "cdiv(cdiv(c_per_group * hw, PARTS), 16) * 16 * (PARTS - 1) < c_per_group * hw"],
        "workspace": "512 * n * groups",
        "cooperative": True,
        "doc": "NCHW; a cooperative team of PARTS programs per (image, group), each a contiguous share of the span, "
               "sums added up in a zeroed workspace line; hw a multiple of 16",
    }
    contracts = {}
    for act in ("Silu", "Pass"):
        for dt in DTYPES:
            contracts[f"GroupNormNCHW_{act}_{dt}"] = single
            contracts[f"GroupNormNCHWTeam_{act}_{dt}"] = team
    return contracts
