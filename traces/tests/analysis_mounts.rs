//! Files put on their mounts by the manifest's mount table (longest
//! mount-point prefix), and bytes and calls per mount in `summary`,
//! against DuckDB on the same segments; a trace without a table says
//! `unknown`.

mod analysis_util;

use analysis_util::*;

const DUCKDB_PER_PREFIX: &str = r#"
import duckdb, json, sys
con = duckdb.connect()
con.execute(f"create view t as select * from read_parquet('{sys.argv[1]}/*.parquet')")
out = {}
for name, cond in [("/data", "path like '/data/%'"), ("/checkpoints", "path like '/checkpoints/%'"),
                   ("/", "path not like '/data/%' and path not like '/checkpoints/%'")]:
    calls, rb, wb = con.execute(f"""select count(*),
        coalesce(sum(case when op in ('read','fault') and ret > 0 then ret else 0 end), 0),
        coalesce(sum(case when op = 'write' and ret > 0 then ret else 0 end), 0)
        from t where {cond}""").fetchall()[0]
    out[name] = [calls, int(rb), int(wb)]
print(json.dumps(out))
"#;

#[test]
fn files_and_bytes_per_mount() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(2, 2, 10, "sequential"));
    let t = trace.to_str().unwrap();

    // A trace without a mount table: every file on the `unknown` mount.
    let s = json(&["summary", t, "--json"]);
    let mounts = s["mounts"].as_array().unwrap();
    assert_eq!(mounts.len(), 1);
    assert_eq!(mounts[0]["mount_point"], "unknown");

    let manifest = trace.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    m["mounts"] = serde_json::json!([
        {"mount_point": "/", "fs_type": "ext4", "source": "/dev/nvme0n1p1"},
        {"mount_point": "/data", "fs_type": "nfs4", "source": "nas:/export"},
        {"mount_point": "/data/train/shard-0000", "fs_type": "tmpfs", "source": "tmpfs"},
        {"mount_point": "/checkpoints", "fs_type": "lustre", "source": "mgs@tcp:/fs"},
    ]);
    std::fs::write(&manifest, serde_json::to_string_pretty(&m).unwrap()).unwrap();

    let f = json(&["files", t, "--json"]);
    for file in f["files"].as_array().unwrap() {
        let p = file["path"].as_str().unwrap();
        let (mount, fs) = if p.starts_with("/data/") {
            ("/data", "nfs4") // shard-00000.bin is not beneath /data/train/shard-0000
        } else if p.starts_with("/checkpoints/") || p == "/checkpoints" {
            ("/checkpoints", "lustre")
        } else {
            ("/", "ext4")
        };
        assert_eq!(file["mount"], mount, "{p}");
        assert_eq!(file["fs_type"], fs, "{p}");
    }

    let duck = python_json(DUCKDB_PER_PREFIX, &[t]);
    let s = json(&["summary", t, "--json"]);
    let mounts = s["mounts"].as_array().unwrap();
    assert_eq!(mounts.len(), 3, "{mounts:?}");
    for mt in mounts {
        let mp = mt["mount_point"].as_str().unwrap();
        assert_eq!(
            serde_json::json!([mt["calls"], mt["read_bytes"], mt["write_bytes"]]),
            duck[mp],
            "{mp}: calls, read and written bytes"
        );
    }
    let bytes: Vec<u64> = mounts
        .iter()
        .map(|m| m["read_bytes"].as_u64().unwrap() + m["write_bytes"].as_u64().unwrap())
        .collect();
    assert!(
        bytes.windows(2).all(|w| w[0] >= w[1]),
        "busiest first: {bytes:?}"
    );
    let text = trace_cmd().args(["summary", t]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("lustre"), "{text}");
}

#[test]
fn a_repaired_manifest_keeps_its_mount_table() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = synth(tmp.path(), "t", &workload(2, 1, 10, "sequential"));
    let manifest = trace.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let table = serde_json::json!([
        {"mount_point": "/", "fs_type": "xfs", "source": "/dev/sda1"},
        {"mount_point": "/data", "fs_type": "nfs4", "source": "nas:/export"},
    ]);
    m["mounts"] = table.clone();
    m["events"] = serde_json::json!("damaged");
    std::fs::write(&manifest, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let t = trace.to_str().unwrap();
    let out = trace_cmd()
        .args(["validate", "--repair", t])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    assert_eq!(m["mounts"], table);
    let s = json(&["summary", t, "--json"]);
    let mounts = s["mounts"].as_array().unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| m["mount_point"] == "/data" && m["fs_type"] == "nfs4"),
        "{mounts:?}"
    );
}
