"""python -m tests.unit.golden --record: write plans.json from the current code."""

from __future__ import annotations

import argparse

from tests.unit.golden import GOLDEN, cases, record, recorded

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--record", action="store_true", help="overwrite plans.json (else: compare and list differences)")
args = parser.parse_args()
if args.record:
    record()
    print(f"wrote {GOLDEN}")
else:
    want = recorded()
    got = dict(cases())
    diff = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    print("\n".join(diff) if diff else "every plan as recorded")
    raise SystemExit(1 if diff else 0)
