use super::forms::{self, Form};
use super::*;
use iorepro_format::event::EventRow;
use iorepro_format::manifest::Source;
use iorepro_format::schema::Op;
use iorepro_format::writer::{TraceWriter, WriterOptions};

/// (op, path, ret, flags, path2)
type Row<'a> = (Op, &'a str, i64, i32, Option<&'a str>);

fn roles_of(rows: &[Row<'_>]) -> FileRoles {
    let timed: Vec<(i64, Row<'_>)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (i as i64 * 1000, *r))
        .collect();
    roles_of_timed(&timed)
}

/// Rows at their times (ns from the trace's start), in any order.
fn roles_of_timed(rows: &[(i64, Row<'_>)]) -> FileRoles {
    let (roles, _) = both_ways(rows);
    roles
}

/// The roles found by the parallel scan, and by rows fed one at a time
/// from the reader's stream (the replayer's way).
fn both_ways(rows: &[(i64, Row<'_>)]) -> (FileRoles, FileRoles) {
    let mut rows = rows.to_vec();
    rows.sort_by_key(|(t, _)| *t);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t");
    let mut w = TraceWriter::create(&out, WriterOptions::new(Source::Synth)).unwrap();
    for &(t, (op, path, ret, flags, path2)) in &rows {
        w.push(&EventRow {
            ts_ns: 1_000_000_000 + t,
            dur_ns: 100,
            host: "h",
            pid: 1,
            tid: 1,
            rank: Some(0),
            comm: "python",
            op,
            path: Some(path),
            fd: Some(3),
            offset: matches!(op, Op::Read | Op::Write).then_some(0),
            size: matches!(op, Op::Read | Op::Write).then_some(ret.max(0)),
            ret,
            flags: Some(flags),
            calls: 1,
            span_ns: None,
            path2,
            via: None,
            exchange: None,
            from_storage: None,
        })
        .unwrap();
    }
    w.finish().unwrap();
    let reader = TraceReader::open(&out).unwrap();
    let scanned = FileRoles::compute(&reader).unwrap();
    let mut b = RolesBuilder::default();
    let stream = TraceReader::open(&out).unwrap().with_columns(&ROLE_COLUMNS);
    for ev in stream.events().unwrap() {
        let ev = ev.unwrap();
        for row in 0..ev.len() {
            b.observe(&ev, row);
        }
    }
    (scanned, b.finish())
}

#[test]
fn roles_follow_what_the_job_did() {
    let wc = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
    let enoent = -(libc::ENOENT as i64);
    let r = roles_of(&[
        (
            Op::Stat,
            "/venv/lib/python3.12/site-packages/torch/__init__.py",
            0,
            0,
            None,
        ),
        (
            Op::Open,
            "/venv/lib/python3.12/site-packages/torch/_C.so",
            3,
            0,
            None,
        ),
        (Op::Read, "/work/data/train/0001.jpg", 4096, 0, None),
        (Op::Read, "/work/data/train/0002.jpg", 4096, 0, None),
        (Op::Stat, "/work/data/train/0003.jpg", 0, 0, None),
        (Op::Getdents, "/work/data/train", 512, 0, None),
        (Op::Stat, "/work/project/mod.py", enoent, 0, None),
        (Op::Open, "/work/ckpt/step-1.pt.tmp", 3, wc, None),
        (Op::Write, "/work/ckpt/step-1.pt.tmp", 1 << 20, 0, None),
        (
            Op::Rename,
            "/work/ckpt/step-1.pt.tmp",
            0,
            0,
            Some("/work/ckpt/step-1.pt"),
        ),
        (Op::Read, "/work/weights/model.safetensors", 8192, 0, None),
        (Op::Open, "/tmp/job/lock", 3, wc, None),
        (Op::Unlink, "/tmp/job/lock", 0, 0, None),
        (Op::Read, "/proc/self/status", 900, 0, None),
        (Op::Read, "/dev/urandom", 16, 0, None),
        (
            Op::Open,
            "/dev/shm/torch_1_2",
            3,
            libc::O_RDWR | libc::O_CREAT,
            None,
        ),
        (Op::Read, "/etc/hosts", 100, 0, None),
        (Op::Stat, "/", 0, 0, None),
        (Op::Stat, "/work/data/train/.", 0, 0, None),
        (Op::Read, "pipe:[99]", 10, 0, None),
        (
            Op::Read,
            "/home/u/.pyenv/versions/3.12/bin/python3.12",
            278,
            0,
            None,
        ),
    ]);
    let want = [
        (
            "/venv/lib/python3.12/site-packages/torch/__init__.py",
            Role::Code,
        ),
        ("/venv/lib/python3.12/site-packages/torch/_C.so", Role::Code),
        ("/work/data/train/0001.jpg", Role::Dataset),
        ("/work/data/train/0003.jpg", Role::Dataset),
        ("/work/data/train", Role::Dataset),
        ("/work/data/train/", Role::Dataset),
        ("/work/project/mod.py", Role::Code),
        ("/work/ckpt/step-1.pt.tmp", Role::Checkpoint),
        ("/work/ckpt/step-1.pt", Role::Checkpoint),
        ("/work/weights/model.safetensors", Role::Checkpoint),
        ("/tmp/job/lock", Role::Scratch),
        ("/proc/self/status", Role::System),
        ("/dev/urandom", Role::System),
        ("/dev/shm/torch_1_2", Role::Launcher),
        ("/etc/hosts", Role::System),
        ("/", Role::System),
        ("pipe:[99]", Role::System),
        ("/home/u/.pyenv/versions/3.12/bin/python3.12", Role::Code),
    ];
    for (p, role) in want {
        assert_eq!(r.role(p), role, "{p}");
    }
    let t = r.totals();
    assert_eq!(t[&Role::Dataset].read_bytes, 8192);
    assert_eq!(t[&Role::Checkpoint].write_bytes, 1 << 20);
    assert_eq!(t[&Role::Checkpoint].read_bytes, 8192);
    assert_eq!(r.files().count(), r.len());
}

#[test]
fn roles_read_as_lowercase_names() {
    assert_eq!(Role::Checkpoint.to_string(), "checkpoint");
    assert_eq!(
        serde_json::to_string(&Role::Dataset).unwrap(),
        "\"dataset\""
    );
    assert_eq!(Role::parse("scratch"), Some(Role::Scratch));
    assert_eq!(Role::parse("nope"), None);
}

// Sizes in rows are signed (the `ret` column).
const MIB: i64 = iorepro_format::units::MIB_BYTES as i64;
const SEC: i64 = 1_000_000_000;
const WC: i32 = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
const WA: i32 = libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND;

fn assert_roles(r: &FileRoles, want: &[(&str, Role)]) {
    for (p, role) in want {
        assert_eq!(r.role(p), *role, "{p}");
    }
}

/// The run's records in the DLIO capture, written once at its end.
const DLIO_RECORDS: [&str; 7] = [
    "/home/u/dlio/out-2/summary.json",
    "/home/u/dlio/out-2/per_epoch_stats.json",
    "/home/u/dlio/out-2/.hydra/config.yaml",
    "/home/u/dlio/out-2/.hydra/hydra.yaml",
    "/home/u/dlio/out-2/.hydra/overrides.yaml",
    "/home/u/dlio/out-2/0_output.json",
    "/home/u/dlio/out-2/1_output.json",
];

/// The DLIO capture's working directory.
const DLIO_CWD: &str = "/home/u/dlio";

/// The rows of a whole capture of a DLIO-like run under `mpirun -np 2` with
/// Hydra's output directory: its start (imports, the launcher's files, the
/// logs opened), a 100 s run reading its dataset and logging, a checkpoint
/// at 50 s, and its records at the end.
fn dlio_capture() -> Vec<(i64, Row<'static>)> {
    let cwd = DLIO_CWD;
    let enoent = -(libc::ENOENT as i64);
    let mut rows: Vec<(i64, Row<'_>)> = vec![
        (0, (Op::Read, "/home/u/venv/pyvenv.cfg", 300, 0, None)),
        (
            1000,
            (
                Op::Stat,
                "/home/u/dlio/<frozen importlib._bootstrap>",
                enoent,
                0,
                None,
            ),
        ),
        (
            2000,
            (
                Op::Stat,
                "/home/u/dlio/<frozen importlib._bootstrap_external>",
                enoent,
                0,
                None,
            ),
        ),
        (
            3000,
            (Op::Stat, "<frozen importlib._bootstrap>", enoent, 0, None),
        ),
        (4000, (Op::Stat, "/tmp/", 0, 0, None)),
        (5000, (Op::Stat, cwd, 0, 0, None)),
        (6000, (Op::Getdents, cwd, 512, 0, None)),
        (7000, (Op::Mkdir, "/tmp/pymp-k2l3", 0, 0, None)),
        (
            8000,
            (Op::Read, "/tmp/pymp-k2l3/listener-9x8y", 120, 0, None),
        ),
        (
            9000,
            (
                Op::Open,
                "/tmp/ompi.vm.0/pid.22978/pmix_dstor_ds12_22978/dstore_sm.lock",
                3,
                libc::O_RDWR,
                None,
            ),
        ),
        (
            10_000,
            (
                Op::Read,
                "/tmp/ompi.vm.0/pid.22978/pmix_dstor_ds12_22978/initial-pmix_shared-segment-0",
                4096,
                0,
                None,
            ),
        ),
        (11_000, (Op::Open, "/home/u/dlio/d2.log", 3, WC, None)),
        (
            12_000,
            (Op::Open, "/home/u/dlio/out-2/dlio.log", 3, WA, None),
        ),
    ];
    // Through a 100 s run: the logs get a line now and then, the data is read.
    for k in 0..50i64 {
        let t = SEC + k * 2 * SEC;
        rows.push((t, (Op::Write, "/home/u/dlio/out-2/dlio.log", 180, 0, None)));
        rows.push((t + 10, (Op::Write, "/home/u/dlio/d2.log", 90, 0, None)));
        let sample = [
            "/home/u/dlio/data/train/img_0_of_4.npz",
            "/home/u/dlio/data/train/img_1_of_4.npz",
            "/home/u/dlio/data/train/img_2_of_4.npz",
            "/home/u/dlio/data/train/img_3_of_4.npz",
        ][k as usize % 4];
        rows.push((t + 20, (Op::Read, sample, 4 * MIB, 0, None)));
    }
    // A checkpoint at 50 s: 4 MiB writes in a burst.
    for k in 0..8 {
        rows.push((
            50 * SEC + k * 1000,
            (
                Op::Write,
                "/home/u/dlio/checkpoints/global_epoch1_step50/layer-0.pt",
                4 * MIB,
                0,
                None,
            ),
        ));
    }
    // The run's records, written once at its end.
    for (k, p) in DLIO_RECORDS.iter().enumerate() {
        let t = 101 * SEC + k as i64 * 1000;
        rows.push((t, (Op::Open, p, 3, WC, None)));
        rows.push((t + 10, (Op::Write, p, 2048, 0, None)));
    }
    rows
}

/// A whole capture of a DLIO-like run under `mpirun -np 2` with Hydra's
/// output directory, as `iorepro-trace files` showed it misjudged.
#[test]
fn a_whole_capture_of_a_dlio_run() {
    let (cwd, records) = (DLIO_CWD, DLIO_RECORDS);
    let rows = dlio_capture();
    let (r, streamed) = both_ways(&rows);
    assert_roles(
        &r,
        &[
            ("/home/u/dlio/out-2/dlio.log", Role::Log),
            ("/home/u/dlio/d2.log", Role::Log),
            ("/home/u/venv/pyvenv.cfg", Role::Code),
            ("/home/u/dlio/<frozen importlib._bootstrap>", Role::Other),
            (
                "/home/u/dlio/<frozen importlib._bootstrap_external>",
                Role::Other,
            ),
            ("<frozen importlib._bootstrap>", Role::Other),
            ("/tmp/pymp-k2l3", Role::Launcher),
            ("/tmp/pymp-k2l3/listener-9x8y", Role::Launcher),
            (
                "/tmp/ompi.vm.0/pid.22978/pmix_dstor_ds12_22978/dstore_sm.lock",
                Role::Launcher,
            ),
            ("/tmp/ompi.vm.0", Role::Launcher),
            ("/tmp", Role::Other),
            ("/home/u/dlio/data/train/img_0_of_4.npz", Role::Dataset),
            (
                "/home/u/dlio/checkpoints/global_epoch1_step50/layer-0.pt",
                Role::Checkpoint,
            ),
        ],
    );
    for p in records {
        assert_eq!(r.role(p), Role::Output, "{p}");
    }
    for dir in ["/tmp", cwd] {
        assert!(r.get(dir).unwrap().directory, "{dir}");
    }
    assert_ne!(r.role("/tmp"), Role::Dataset);
    // The totals count the dataset's files, not its directories.
    let t = r.totals();
    assert_eq!(t[&Role::Dataset].files, 4);
    assert_eq!(t[&Role::Dataset].read_bytes, 50 * 4 * MIB as u64);
    assert_eq!(t[&Role::Checkpoint].files, 1);
    assert_eq!(t[&Role::Checkpoint].write_bytes, 32 * MIB as u64);
    assert_eq!(t[&Role::Output].files, 7);
    assert_eq!(t[&Role::Log].files, 2);
    assert_eq!(t[&Role::Log].write_bytes, 50 * (180 + 90));
    let dirs: u64 = t.values().map(|t| t.directories).sum();
    let files: u64 = t.values().map(|t| t.files).sum();
    assert_eq!(files + dirs, r.len() as u64);
    assert_eq!(dirs, r.files().filter(|f| f.directory).count() as u64);
    // Fed a row at a time (the replayer's way) the roles are the same.
    assert_eq!(
        r.files().collect::<Vec<_>>(),
        streamed.files().collect::<Vec<_>>()
    );
    assert_eq!(r.totals(), streamed.totals());
}

/// A name says nothing: small appends spread over the run are a log, bulk
/// writes in a burst are a checkpoint.
#[test]
fn small_appends_are_a_log_and_bulk_writes_a_checkpoint() {
    let mut rows: Vec<(i64, Row<'_>)> = vec![
        (0, (Op::Open, "/w/run/console", 3, WC, None)),
        (0, (Op::Open, "/w/run/progress.txt", 3, WA, None)),
        (0, (Op::Read, "/w/data/shard-0", 4096, 0, None)),
    ];
    for k in 0..40i64 {
        rows.push((k * SEC, (Op::Write, "/w/run/console", 120, 0, None)));
        rows.push((k * SEC + 5, (Op::Write, "/w/run/progress.txt", 30, 0, None)));
    }
    rows.push((20 * SEC, (Op::Open, "/w/run/state", 3, WC, None)));
    for k in 0..16 {
        rows.push((
            20 * SEC + 1 + k,
            (Op::Write, "/w/run/state", 4 * MIB, 0, None),
        ));
    }
    // Small writes in a burst are no log: a small save written in pieces.
    rows.push((30 * SEC, (Op::Open, "/w/run/small_state", 3, WC, None)));
    for k in 0..16 {
        rows.push((
            30 * SEC + 1 + k,
            (Op::Write, "/w/run/small_state", 4096, 0, None),
        ));
    }
    // Rewritten from the start at every save: no log either.
    for save in 0..10i64 {
        let t = save * 4 * SEC;
        rows.push((t, (Op::Open, "/w/run/latest", 3, WC, None)));
        rows.push((t + 1, (Op::Write, "/w/run/latest", 1024, 0, None)));
    }
    let r = roles_of_timed(&rows);
    assert_roles(
        &r,
        &[
            ("/w/run/console", Role::Log),
            ("/w/run/progress.txt", Role::Log),
            ("/w/run/state", Role::Checkpoint),
            ("/w/run/small_state", Role::Checkpoint),
            ("/w/run/latest", Role::Checkpoint),
            ("/w/data/shard-0", Role::Dataset),
        ],
    );
}

/// A run that is nothing but a burst of small writes (`dd bs=4k`, then a
/// read back) spans the whole run with them, yet writes data, not a log.
#[test]
fn a_burst_of_small_writes_over_a_short_run_is_no_log() {
    let mut rows: Vec<(i64, Row<'_>)> = vec![
        (0, (Op::Open, "/data/f", 3, WC, None)),
        // Created and never written: no writes to judge a log by.
        (0, (Op::Open, "/data/empty", 4, WC, None)),
    ];
    for k in 0..2000i64 {
        rows.push((1 + k * 10_000, (Op::Write, "/data/f", 4096, 0, None)));
    }
    rows.push((21_000_000, (Op::Read, "/data/f", 4096, 0, None)));
    let r = roles_of_timed(&rows);
    assert_roles(
        &r,
        &[
            ("/data/f", Role::Checkpoint),
            ("/data/empty", Role::Checkpoint),
        ],
    );
}

/// Records of a run are small against its bulk writes; a family of
/// records written side by side that together are bulk is a checkpoint.
#[test]
fn records_are_small_against_the_runs_bulk_writes() {
    let mut rows: Vec<(i64, Row<'_>)> = vec![
        (
            0,
            (
                Op::Write,
                "/w/outputs/2024-05-01/10-00-00/.hydra/config.yaml",
                900,
                0,
                None,
            ),
        ),
        (
            1,
            (
                Op::Write,
                "/w/outputs/2024-05-01/10-00-00/metrics.csv",
                5000,
                0,
                None,
            ),
        ),
        (2, (Op::Write, "/w/run/results.json", 10_000, 0, None)),
        (3, (Op::Write, "/w/run/big.json", 3 * MIB, 0, None)),
        (4, (Op::Write, "/w/run/model.npz", 2000, 0, None)),
    ];
    let shards: Vec<String> = (0..32)
        .map(|k| format!("/w/save/step_100/shard_{k}.json"))
        .collect();
    for (k, p) in shards.iter().enumerate() {
        rows.push((10 + k as i64, (Op::Write, p.as_str(), 48 << 10, 0, None)));
    }
    let r = roles_of_timed(&rows);
    assert_roles(
        &r,
        &[
            (
                "/w/outputs/2024-05-01/10-00-00/.hydra/config.yaml",
                Role::Output,
            ),
            ("/w/outputs/2024-05-01/10-00-00/metrics.csv", Role::Output),
            ("/w/run/results.json", Role::Output),
            ("/w/run/big.json", Role::Checkpoint),
            ("/w/run/model.npz", Role::Checkpoint),
            ("/w/save/step_100/shard_7.json", Role::Checkpoint),
        ],
    );
    // A run that writes nothing but records keeps them records.
    let r = roles_of(&[
        (Op::Write, "/w/o/.hydra/hydra.yaml", 6000, 0, None),
        (Op::Write, "/w/o/.hydra/config.yaml", 1000, 0, None),
        (Op::Write, "/w/o/stats.json", 3000, 0, None),
    ]);
    assert_roles(
        &r,
        &[
            ("/w/o/.hydra/hydra.yaml", Role::Output),
            ("/w/o/.hydra/config.yaml", Role::Output),
            ("/w/o/stats.json", Role::Output),
        ],
    );
}

/// A step-K checkpoint family, sharded over ranks, written and read back.
#[test]
fn a_step_checkpoint_family() {
    let mut rows: Vec<Row<'_>> = Vec::new();
    let names = [
        "/w/ckpt/step_100/rank_0.pt",
        "/w/ckpt/step_100/rank_1.pt",
        "/w/ckpt/step_200/rank_0.pt",
        "/w/ckpt/step_200/rank_1.pt",
    ];
    for p in names {
        rows.push((Op::Open, p, 3, WC, None));
        for _ in 0..4 {
            rows.push((Op::Write, p, 4 * MIB, 0, None));
        }
    }
    rows.push((Op::Read, "/w/ckpt/step_200/rank_0.pt", 4 * MIB, 0, None));
    rows.push((Op::Read, "/w/ckpt/step_100/model.pth", MIB, 0, None));
    rows.push((
        Op::Stat,
        "/w/ckpt/step_300",
        -(libc::ENOENT as i64),
        0,
        None,
    ));
    rows.push((Op::Getdents, "/w/ckpt/step_100", 200, 0, None));
    let r = roles_of(&rows);
    for p in names {
        assert_eq!(r.role(p), Role::Checkpoint, "{p}");
    }
    assert_eq!(r.role("/w/ckpt/step_100/model.pth"), Role::Checkpoint);
    assert_eq!(r.role("/w/ckpt/step_100"), Role::Checkpoint);
    assert!(r.get("/w/ckpt/step_100").unwrap().directory);
    assert_eq!(r.role("/w/ckpt/step_300"), Role::Checkpoint);
    assert_eq!(r.totals()[&Role::Checkpoint].files, 6);
}

/// A launcher's and runtime's files, names that are no file, and an
/// environment's configuration.
#[test]
fn launcher_files_pseudo_names_and_environments() {
    let rw = libc::O_RDWR | libc::O_CREAT;
    let r = roles_of(&[
        (Op::Open, "/dev/shm/vader_segment.vm.1.0", 3, rw, None),
        (Op::Write, "/dev/shm/vader_segment.vm.1.0", 4096, 0, None),
        (Op::Open, "/dev/shm/nccl-Ab12Cd", 3, rw, None),
        (Op::Open, "/dev/shm/sem.mp-x1", 3, rw, None),
        (Op::Open, "/dev/shm/my_cache", 3, rw, None),
        (
            Op::Read,
            "/var/spool/slurmd/job00042/slurm_script",
            900,
            0,
            None,
        ),
        (Op::Write, "/home/u/slurm-42.out", 300, 0, None),
        (
            Op::Write,
            "/tmp/torchelastic_x/none_y/attempt_0/0/error.json",
            10,
            0,
            None,
        ),
        (Op::Stat, "/tmp/pmix-4242", 0, 0, None),
        (
            Op::Stat,
            "/home/u/job/<string>",
            -(libc::ENOENT as i64),
            0,
            None,
        ),
        (Op::Stat, "/home/u/job", 0, 0, None),
        (Op::Stat, "<stdin>", -(libc::ENOENT as i64), 0, None),
        (Op::Read, "/home/u/venv/pyvenv.cfg", 200, 0, None),
        (
            Op::Read,
            "/home/u/venv/lib/python3.12/site-packages/_virtualenv.pth",
            18,
            0,
            None,
        ),
        (
            Op::Read,
            "/home/u/venv/lib/python3.12/site-packages/numpy-2.0.dist-info/METADATA",
            5000,
            0,
            None,
        ),
        (Op::Read, "/home/u/src/pkg.egg-link", 30, 0, None),
        (Op::Read, "/home/u/job/weights/model.pth", 4096, 0, None),
    ]);
    assert_roles(
        &r,
        &[
            ("/dev/shm/vader_segment.vm.1.0", Role::Launcher),
            ("/dev/shm/nccl-Ab12Cd", Role::Launcher),
            ("/dev/shm/sem.mp-x1", Role::Launcher),
            ("/dev/shm/my_cache", Role::Scratch),
            ("/var/spool/slurmd/job00042/slurm_script", Role::Launcher),
            ("/home/u/slurm-42.out", Role::Log),
            (
                "/tmp/torchelastic_x/none_y/attempt_0/0/error.json",
                Role::Launcher,
            ),
            ("/tmp/pmix-4242", Role::Launcher),
            ("/home/u/job/<string>", Role::Other),
            ("<stdin>", Role::Other),
            ("/home/u/venv/pyvenv.cfg", Role::Code),
            (
                "/home/u/venv/lib/python3.12/site-packages/_virtualenv.pth",
                Role::Code,
            ),
            (
                "/home/u/venv/lib/python3.12/site-packages/numpy-2.0.dist-info/METADATA",
                Role::Code,
            ),
            ("/home/u/src/pkg.egg-link", Role::Code),
            ("/home/u/job/weights/model.pth", Role::Checkpoint),
        ],
    );
    // Launcher paths and names that are no file do not vote for their
    // directories: /tmp holds only the launcher's, /home/u/job the
    // weights (a checkpoint) and a pseudo name.
    assert_eq!(r.role("/tmp"), Role::Other);
    assert_eq!(r.role("/home/u/job"), Role::Checkpoint);
    assert_eq!(r.totals()[&Role::Launcher].files, 6);
    assert_eq!(forms::form_of("/home/u/job/<string>"), Form::Pseudo);
}

#[test]
fn every_role_reads_back_from_its_name() {
    for r in Role::ALL {
        assert_eq!(Role::parse(r.as_str()), Some(r));
        assert_eq!(r.to_string(), r.as_str());
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            format!("\"{}\"", r.as_str())
        );
    }
    assert!(!Role::REPLAYED_BY_DEFAULT.contains(&Role::Launcher));
    for r in [Role::Log, Role::Output] {
        assert!(Role::REPLAYED_BY_DEFAULT.contains(&r));
    }
    assert!(Role::names().contains("launcher"));
}

#[test]
fn a_role_list_reads_once_for_every_command() {
    let list =
        |names: &[&str]| Role::parse_list(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>());
    assert_eq!(
        list(&["checkpoint", " dataset", "checkpoint"]).unwrap(),
        vec![Role::Checkpoint, Role::Dataset]
    );
    assert_eq!(list(&["log", "all"]).unwrap(), Role::ALL.to_vec());
    assert_eq!(list(&[]).unwrap(), Vec::<Role>::new());
    let e = list(&["data"]).unwrap_err();
    assert!(
        e.contains("`data` is not a role") && e.contains("all"),
        "{e}"
    );
}

/// A save's folder made again (mkdir finds it there, as a second run into
/// the folders of the first does) is named there all the same; a folder
/// only looked up is not.
#[test]
fn a_folder_made_again_is_where_its_save_was_first_named() {
    let eexist = -(libc::EEXIST as i64);
    let rows = [
        (10, (Op::Stat, "/w/ckpt", 0, 0, None)),
        (20, (Op::Mkdir, "/w/ckpt/step_4", eexist, 0, None)),
        (30, (Op::Mkdir, "/w/ckpt/step_4", eexist, 0, None)),
        (90, (Op::Open, "/w/ckpt/step_4/rank_0.pt", 3, WC, None)),
        (
            95,
            (Op::Write, "/w/ckpt/step_4/rank_0.pt", 4 * MIB, 0, None),
        ),
        (
            99,
            (Op::Write, "/w/ckpt/step_4/rank_0.pt", 4 * MIB, 0, None),
        ),
    ];
    let r = roles_of_timed(&rows);
    let dir = r.get("/w/ckpt/step_4").unwrap();
    assert!(dir.directory);
    let at = |ns| Some(Named { ns, pid: 1 });
    assert_eq!(dir.made_named, at(1_000_000_020));
    assert_eq!(r.get("/w/ckpt").unwrap().made_named, None);
    let mut named = r.checkpoints_named();
    named.sort_unstable_by_key(|n| n.ns);
    assert_eq!(named.first().copied(), at(1_000_000_020));
}

#[test]
fn totals_per_role_and_mount_add_up_to_each_role_and_each_mount() {
    let wc = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
    let mut r = roles_of(&[
        (Op::Read, "/data/train/0001.jpg", 4096, 0, None),
        (Op::Read, "/data/train/0002.jpg", 8192, 0, None),
        (Op::Getdents, "/data/train", 512, 0, None),
        (Op::Read, "/home/u/extra/0003.jpg", 1024, 0, None),
        (Op::Open, "/ckpt/step-1.pt", 3, wc, None),
        (Op::Write, "/ckpt/step-1.pt", 1 << 20, 0, None),
    ]);
    let mount = |p: &str, fs: &str| iorepro_format::mounts::Mount {
        mount_point: p.to_string(),
        fs_type: fs.to_string(),
        source: "dev".to_string(),
    };
    r.assign_mounts(&MountTable::new(&[
        mount("/", "ext4"),
        mount("/data", "nfs4"),
        mount("/ckpt", "lustre"),
    ]));
    let rows = r.per_role_and_mount();
    let at = |role: Role, m: &str| {
        rows.iter()
            .find(|x| x.role == role && x.mount_point == m)
            .unwrap_or_else(|| panic!("{role} on {m}: {rows:?}"))
    };
    let data = at(Role::Dataset, "/data");
    assert_eq!((data.fs_type.as_str(), data.totals.files), ("nfs4", 2));
    assert_eq!(data.totals.directories, 1, "the listed directory");
    assert_eq!(data.totals.read_bytes, 12288);
    assert_eq!(at(Role::Dataset, "/").totals.read_bytes, 1024);
    assert_eq!(at(Role::Checkpoint, "/ckpt").totals.write_bytes, 1 << 20);
    // Busiest mount first within a role, roles in their order.
    let first_dataset = rows.iter().find(|x| x.role == Role::Dataset).unwrap();
    assert_eq!(first_dataset.mount_point, "/data");
    assert!(rows.windows(2).all(|w| w[0].role <= w[1].role), "{rows:?}");
    for (role, t) in r.totals() {
        let mut sum = RoleTotals::default();
        for x in rows.iter().filter(|x| x.role == *role) {
            sum.files += x.totals.files;
            sum.directories += x.totals.directories;
            sum.calls += x.totals.calls;
            sum.read_bytes += x.totals.read_bytes;
            sum.write_bytes += x.totals.write_bytes;
        }
        assert_eq!(sum, *t, "{role}");
    }
    for m in r.per_mount() {
        let on: Vec<_> = rows
            .iter()
            .filter(|x| x.mount_point == m.mount_point)
            .collect();
        let files: u64 = on
            .iter()
            .map(|x| x.totals.files + x.totals.directories)
            .sum();
        let bytes: u64 = on
            .iter()
            .map(|x| x.totals.read_bytes + x.totals.write_bytes)
            .sum();
        assert_eq!(
            (files, bytes),
            (m.files, m.read_bytes + m.write_bytes),
            "{}",
            m.mount_point
        );
    }
}
