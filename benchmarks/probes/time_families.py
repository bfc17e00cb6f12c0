"""Time the candidates of the named kernel families with no numerical check, best per (family, PARTS).

    python3 benchmarks/probes/time_families.py DIST FAMILY,... NxHxC,... DTYPE,...
    e.g. ... build/gnp GroupNormClusterS0,GroupNormClusterS8 2x16x640,2x16x1280 fp16,fp32

For probe variants that give wrong output on purpose (an exchange left out, to time what it costs),
which family_bench.py's numerical check would reject. SiLU, 32 groups, rotating inputs, best of two
100-launch timings per kernel."""
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.gpu_common import open_gpu  # noqa: E402
from runtime.problem import GroupNormProblem, GroupNormSetup  # noqa: E402

dist, families = sys.argv[1], sys.argv[2].split(",")
shapes = [tuple(int(v) for v in s.split("x")) for s in sys.argv[3].split(",")]
dtypes = sys.argv[4].split(",")
backend, registry, timer, ceiling = open_gpu(dist)
rng = np.random.default_rng(0)
for dtype in dtypes:
    for n, h, c in shapes:
        setup = GroupNormSetup(registry, timer, GroupNormProblem(dtype, n, h * h, c), rng)
        best = defaultdict(lambda: (1e9, ""))
        for name in setup.candidates():
            fam = name.split("_")[0]
            if fam not in families:
                continue
            t = min(setup.time_ms(name, 100) for _ in range(2)) * 1e3
            key = f"{fam}_p{registry.by_name[name].constants.get('PARTS', 1)}"
            best[key] = min(best[key], (t, name))
        print(f"== {dtype} {n}x{h}x{h}x{c}")
        for t, name in sorted(best.values()):
            print(f"   {t:6.2f} us  {name}")
        setup.free()
