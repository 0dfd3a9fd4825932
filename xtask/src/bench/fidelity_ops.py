# Where a replay's phase timing differs from the trace's, op by op: for each
# pair of matched phases, per rank, the time spent inside calls (by op kind)
# and between them (the compute the replay keeps), in the trace and in the
# replay. Usage: fidelity_ops.py TRACE OPS COMPARE.json PHASES_A.json PHASES_B.json
import json, sys
import duckdb

trace, ops, compare, phases_a, phases_b = sys.argv[1:6]
KINDS = ("open", "close", "read", "write", "fsync", "fdatasync", "fault")


def rows(path):
    """(start ns, ns inside calls, end ns, rank, op) of every replayable row."""
    con = duckdb.connect()
    src = f"read_parquet('{path}/**/*.parquet', union_by_name = true)"
    cols = con.sql(f"select * from {src} limit 0").columns
    # A run (format 0.2) lasts its span; older traces have no runs.
    span = "greatest(dur_ns, coalesce(span_ns, 0))" if "span_ns" in cols else "dur_ns"
    rel = con.sql(
        f"select epoch_ns(ts), dur_ns, epoch_ns(ts) + {span}, rank, op from {src} "
        f"where op in {KINDS} and ret >= 0 order by ts"
    )
    return rel.fetchall()


def load(p):
    with open(p) as f:
        return json.load(f)


def window(all_rows, t0, phase):
    """Time inside calls by op kind, and between them, summed over ranks."""
    lo, hi = t0 + phase["start_s"] * 1e9, t0 + phase["end_s"] * 1e9
    per_rank = {}
    for t, d, end, rank, op in all_rows:
        if lo <= t <= hi:
            per_rank.setdefault(rank, []).append((t, d, end, op))
    calls, gaps = {}, 0.0
    for r in per_rank.values():
        inside = 0.0
        for _, d, _, op in r:
            calls[op] = calls.get(op, 0.0) + d / 1e6
            inside += d / 1e6
        span = (max(e for _, _, e, _ in r) - r[0][0]) / 1e6
        gaps += max(span - inside, 0.0)
    return {"calls_ms": calls, "gaps_ms": gaps}


a_rows, b_rows = rows(trace), rows(ops)
a0, b0 = min(r[0] for r in a_rows), min(r[0] for r in b_rows)
pa, pb = load(phases_a)["phases"], load(phases_b)["phases"]
out = []
for m in load(compare)["phases"]:
    i, j = m.get("a_index"), m.get("b_index")
    if i is None or j is None or pa[i]["kind"] != pb[j]["kind"]:
        continue
    out.append({"kind": pa[i]["kind"], "trace": window(a_rows, a0, pa[i]), "replay": window(b_rows, b0, pb[j])})
print(json.dumps(out))
