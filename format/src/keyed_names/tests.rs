use super::*;

fn anon(key: &str) -> Anonymizer {
    Anonymizer::new(&Key::from_bytes(key.as_bytes()))
}

/// The letters of a hash: a to p, never a digit.
fn hashed(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| (b'a'..=b'p').contains(&b))
}

#[test]
fn components_keep_structure_extension_and_small_numbers() {
    let a = anon("a key of sixteen bytes or more");
    let p = a.path("/home/alice/secret-model/ckpt/step_100/__3_0.distcp");
    let comps: Vec<&str> = p.split('/').collect();
    assert_eq!(comps.len(), 7, "{p}");
    assert_eq!(comps[0], "");
    assert!(comps[1..4].iter().all(|c| hashed(c)), "{p}");
    let (h, rest) = comps[6].split_at(NAME_LETTERS);
    assert!(hashed(h));
    assert_eq!(rest, "_3_0.distcp");
    assert!(comps[5].ends_with("_100"));
    // One name, one hash, wherever it is.
    let q = a.path("/home/alice/data/shard-0001.tar.gz");
    assert_eq!(p.split('/').nth(2), q.split('/').nth(2));
    assert!(q.ends_with("_0001.tar.gz"), "{q}");
    // The family of a shard keeps one hash: only its numbers differ.
    let four = a.component("__4_0.distcp");
    assert_eq!(four[..NAME_LETTERS], comps[6][..NAME_LETTERS]);
    assert_eq!(&four[NAME_LETTERS..], "_4_0.distcp");
}

#[test]
fn names_that_say_what_a_path_is_stay() {
    let a = anon("a key of sixteen bytes or more");
    for (p, prefix) in [
        ("/proc/self/status", "/proc/"),
        ("/sys/fs/cgroup/x", "/sys/"),
        ("/dev/null", "/dev/"),
        ("/dev/shm/torch_123", "/dev/shm/"),
    ] {
        let h = a.path(p);
        assert!(h.starts_with(prefix), "{h}");
        assert_eq!(h.matches('/').count(), p.matches('/').count(), "{h}");
        assert!(!h.contains("self") && !h.contains("torch"), "{h}");
    }
    assert_eq!(a.path("pipe:[123]"), "pipe:[123]");
    assert_eq!(a.path("anon_inode:[eventfd]"), "anon_inode:[eventfd]");
    assert!(a.path("/memfd:alice (deleted)").starts_with("/memfd:"));
    assert!(!a.path("/memfd:alice (deleted)").contains("alice"));
    let frozen = a.path("/home/u/<frozen importlib._bootstrap>");
    assert!(frozen.ends_with('>') && frozen.contains("/<"), "{frozen}");
    assert_eq!(a.path(""), "");
    assert_eq!(a.path("/"), "/");
    let rel = a.path("../a/./b/");
    assert!(rel.starts_with("../") && rel.contains("/./") && rel.ends_with('/'));
    // A hidden name stays hidden; the word `rank` before a number stays.
    assert!(a.component(".hydra").starts_with('.'));
    let z = a.component("zero_pp_rank_0_mp_rank_00_optim_states.pt");
    assert!(z.ends_with("rank0rank00.pt"), "{z}");
    assert!(!a.component("ranking_0.pt").contains("rank"));
}

#[test]
fn numbers_alone_and_large_numbers_are_hashed() {
    let a = anon("a key of sixteen bytes or more");
    let uid = a.component("1000");
    assert!(!uid.contains("1000"), "{uid}");
    let digits = &uid[NAME_LETTERS + 1..];
    assert_eq!(digits.len(), NUMBER_DIGITS);
    assert!(digits.parse::<u64>().unwrap() >= KEPT_BELOW);
    let job = a.component("job_4815162342");
    assert!(!job.contains("4815162342"), "{job}");
    assert!(a.component("0.pt").ends_with("_0.pt"));
    // Unknown extensions go with the name.
    assert!(!a.component("report.alice").contains("alice"));
}

#[test]
fn the_key_decides_every_hash() {
    let (a, b) = (
        anon("a key of sixteen bytes or more"),
        anon("another key, also long"),
    );
    let p = "/home/alice/data/train/0001.npz";
    assert_eq!(a.path(p), anon("a key of sixteen bytes or more").path(p));
    assert_ne!(a.path(p), b.path(p));
    assert_ne!(a.host("node7"), b.host("node7"));
    assert_ne!(a.host("node7"), a.component("node7"));
    assert!(hashed(&a.host("node7")) && hashed(&a.thread("python3")));
}

#[test]
fn mounts_keep_their_kind() {
    let a = anon("a key of sixteen bytes or more");
    let m = a.mount(&Mount {
        mount_point: "/mnt/alice-data".into(),
        fs_type: "nfs4".into(),
        source: "fileserver:/export/alice".into(),
    });
    assert_eq!(m.fs_type, "nfs4");
    assert_eq!(m.mount_point, a.path("/mnt/alice-data"));
    assert!(!m.source.contains("alice") && !m.source.contains("fileserver"));
    let t = a.mount(&Mount {
        mount_point: "/dev/shm".into(),
        fs_type: "tmpfs".into(),
        source: "tmpfs".into(),
    });
    assert_eq!(
        (t.mount_point.as_str(), t.source.as_str()),
        ("/dev/shm", "tmpfs")
    );
}

#[test]
fn bad_keys_are_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    let e = Key::load(&missing).unwrap_err().to_string();
    assert!(e.contains("none") && e.contains("bad key file"), "{e}");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    assert!(Key::load(&empty).unwrap_err().to_string().contains("empty"));
    let short = dir.path().join("short");
    std::fs::write(&short, "hunter2").unwrap();
    assert!(Key::load(&short)
        .unwrap_err()
        .to_string()
        .contains("fewer than 16"));
    let good = dir.path().join("good");
    std::fs::write(&good, [7u8; 32]).unwrap();
    assert!(Key::load(&good).is_ok());
    assert_eq!(format!("{:?}", Key::load(&good).unwrap()), "Key(..)");
}

#[test]
fn the_command_line_goes_and_the_program_stays_on_request() {
    let cmd: Vec<String> = [
        "/home/alice/venv/bin/python3",
        "train.py",
        "--hf-token",
        "hf_x",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(manifest::command(Some(&cmd), false), None);
    assert_eq!(
        manifest::command(Some(&cmd), true),
        Some(vec!["python3".to_string()])
    );
    let c = manifest::extra(
        "collector",
        &serde_json::json!({"hooks": ["a"], "load_s": 0.5, "target": "Command([\"/home/alice/x\"])"}),
    )
    .unwrap();
    assert_eq!(c["target"], "command");
    assert!(manifest::extra("filtered_from", &serde_json::json!({})).is_none());
}

#[test]
fn a_process_start_keeps_its_figures_and_hashes_its_host_as_the_rows() {
    let a = anon("k");
    let mut m = crate::Manifest::new(crate::Source::Ebpf);
    m.hosts = vec!["gpu-node-17".into()];
    m.process_starts = vec![crate::processes::ProcessStart {
        host: None,
        pid: 42,
        parent: 7,
        forked_unix_ns: 123,
    }];
    let c = manifest::carried(&a, &m, false);
    let s = &c.process_starts[0];
    assert_eq!((s.pid, s.parent, s.forked_unix_ns), (42, 7, 123));
    assert_eq!(s.host.as_deref(), Some(a.host("gpu-node-17").as_str()));
    assert!(!s.host.as_deref().unwrap().contains("gpu"));
}

#[test]
fn a_request_url_keeps_its_scheme_and_parameter_names_and_hashes_the_rest() {
    let a = anon("a key of sixteen bytes or more");
    let u = a.path(
        "http://store.example:8000/alice-data/train/shard-0001.tar?partNumber=2&uploadId=2~Xyz",
    );
    assert!(crate::paths::is_url(&u), "{u}");
    assert!(
        !u.contains("alice") && !u.contains("store.example") && !u.contains("Xyz"),
        "{u}"
    );
    let (path, query) = u.split_once('?').unwrap();
    assert_eq!(path.split('/').count(), 6, "{u}");
    assert!(
        query.starts_with("partNumber=") && query.contains("&uploadId="),
        "{u}"
    );
    // One object, one name, with or without its query.
    let whole = a.path("http://store.example:8000/alice-data/train/shard-0001.tar");
    assert_eq!(whole, path);
}
