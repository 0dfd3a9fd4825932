# The I/O of a training job's trace (a capture, or a replay's --record-ops)
# that the scale-fidelity comparison looks at, as one JSON document: dataset
# bytes read and successful opens per dataset file (files under a `dataset`
# directory), checkpoint bytes written in all and per writing rank, and
# checkpoint files written (files under a `ckpt` directory).
# Usage: scale_fidelity.py TRACE
import json, sys
import duckdb

con = duckdb.connect()
src = f"read_parquet('{sys.argv[1]}/**/*.parquet', union_by_name = true)"
data = "path like '%/dataset/%'"
ckpt = "path like '%/ckpt/%'"
data_bytes = con.sql(
    f"select coalesce(sum(ret), 0) from {src} where op = 'read' and ret > 0 and {data}"
).fetchall()[0][0]
# A row may stand for a run of calls (`calls`); opens are never runs.
opens = dict(
    con.sql(
        f"select regexp_extract(path, '[^/]+$'), count(*) from {src} "
        f"where op = 'open' and ret >= 0 and {data} group by 1"
    ).fetchall()
)
writers = [
    int(b)
    for (b,) in con.sql(
        f"select sum(ret) from {src} where op = 'write' and ret > 0 and {ckpt} "
        f"group by rank order by 1 desc"
    ).fetchall()
]
files = con.sql(
    f"select count(distinct path) from {src} where op = 'write' and ret > 0 and {ckpt}"
).fetchall()[0][0]
print(
    json.dumps(
        {
            "data_bytes": int(data_bytes),
            "opens": opens,
            "ckpt_bytes": sum(writers),
            "per_writer": writers,
            "ckpt_files": int(files),
        }
    )
)
