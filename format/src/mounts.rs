//! The file systems a job's files were on. A capture records the mount table
//! of the job's mount namespace (`mounts` in `manifest.json`); the analysis
//! puts each path on the mount whose mount point is its longest prefix, so
//! I/O splits by storage tier (local NVMe, NFS, Lustre, an object store's
//! FUSE mount), which is what a team comparing storage compares.
//!
//! The table is parsed from `/proc/PID/mountinfo` (see proc(5)): field 5 is
//! the mount point, and after the ` - ` separator come the file system type
//! and the mount source. Spaces, tabs, newlines and backslashes in those
//! fields are written as octal escapes (`\040`).

use serde::{Deserialize, Serialize};

/// What a path on no recorded mount (or in a trace without a mount table)
/// is on.
pub const UNKNOWN_MOUNT: &str = "unknown";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub mount_point: String,
    pub fs_type: String,
    /// The device, server export or FUSE daemon name the kernel shows.
    pub source: String,
}

/// The lines of a `mountinfo` file that parse; a line that does not is
/// left out rather than failing a capture. A mount point mounted over again
/// keeps its last (topmost) mount.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    let mut out: Vec<Mount> = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount_point) = left.split(' ').nth(4) else {
            continue;
        };
        let mut r = right.split(' ');
        let (Some(fs_type), Some(source)) = (r.next(), r.next()) else {
            continue;
        };
        let m = Mount {
            mount_point: unescape(mount_point),
            fs_type: unescape(fs_type),
            source: unescape(source),
        };
        out.retain(|o| o.mount_point != m.mount_point);
        out.push(m);
    }
    out
}

/// `\NNN` octal escapes back to their bytes.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Adds the mounts of `later` that `table` lacks (a mount made while the job
/// ran); a mount point already there keeps the mount seen first, the one
/// the job started on.
pub fn union(table: &mut Vec<Mount>, later: Vec<Mount>) {
    for m in later {
        if !table.iter().any(|t| t.mount_point == m.mount_point) {
            table.push(m);
        }
    }
}

/// Paths to mounts by longest mount-point prefix.
#[derive(Debug, Clone, Default)]
pub struct MountTable {
    /// Longest mount point first.
    mounts: Vec<Mount>,
}

impl MountTable {
    pub fn new(mounts: &[Mount]) -> Self {
        let mut mounts = mounts.to_vec();
        mounts.sort_by(|a, b| {
            b.mount_point
                .len()
                .cmp(&a.mount_point.len())
                .then(a.mount_point.cmp(&b.mount_point))
        });
        MountTable { mounts }
    }

    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty()
    }

    /// The mount `path` is on; `None` for a path that is no absolute path
    /// (a pipe, a socket, the empty descriptor form) or a table without
    /// a root.
    pub fn lookup(&self, path: &str) -> Option<&Mount> {
        if !path.starts_with('/') {
            return None;
        }
        self.mounts.iter().find(|m| under(path, &m.mount_point))
    }
}

fn under(path: &str, dir: &str) -> bool {
    if dir == "/" {
        return true;
    }
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
30 22 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs rw
41 22 0:40 / /mnt/data rw,relatime shared:20 - nfs4 server:/export rw,vers=4.2
42 41 0:41 / /mnt/data/fast rw - lustre 10.0.0.1@o2ib:/fs rw
43 22 0:42 / /mnt/my\\040bucket rw - fuse.s3fs s3fs rw
bad line
";

    #[test]
    fn parses_and_finds_the_longest_prefix() {
        let mounts = parse_mountinfo(INFO);
        assert_eq!(mounts.len(), 5);
        assert_eq!(mounts[4].mount_point, "/mnt/my bucket");
        assert_eq!(mounts[4].fs_type, "fuse.s3fs");
        assert_eq!(mounts[2].source, "server:/export");
        let t = MountTable::new(&mounts);
        let at = |p: &str| t.lookup(p).map(|m| m.mount_point.as_str());
        assert_eq!(at("/mnt/data/fast/x.bin"), Some("/mnt/data/fast"));
        assert_eq!(at("/mnt/data/fastx"), Some("/mnt/data"));
        assert_eq!(at("/mnt/data"), Some("/mnt/data"));
        assert_eq!(at("/mnt/my bucket/obj"), Some("/mnt/my bucket"));
        assert_eq!(at("/home/u/train.py"), Some("/"));
        assert_eq!(at("/dev/shm/x"), Some("/dev/shm"));
        assert_eq!(at("pipe:[123]"), None);
        assert_eq!(at(""), None);
    }

    #[test]
    fn a_mount_point_mounted_over_keeps_the_top_mount() {
        let info = "1 0 0:1 / /mnt rw - ext4 a rw\n2 1 0:2 / /mnt rw - tmpfs b rw\n";
        let m = parse_mountinfo(info);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].fs_type, "tmpfs");
        let mut t = m.clone();
        union(
            &mut t,
            parse_mountinfo("3 0 0:3 / /mnt rw - xfs c rw\n4 0 0:4 / /scratch rw - xfs d rw\n"),
        );
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].fs_type, "tmpfs");
        assert_eq!(t[1].mount_point, "/scratch");
    }

    #[test]
    fn a_manifest_with_another_shape_of_mounts_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = crate::Manifest::new(crate::Source::Import);
        m.complete = true;
        m.store(dir.path()).unwrap();
        let p = dir.path().join("manifest.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["mounts"] = serde_json::json!({"/": "ext4"});
        std::fs::write(&p, v.to_string()).unwrap();
        assert_eq!(crate::Manifest::load(dir.path()).unwrap().mounts, None);
        v["mounts"] = serde_json::json!([{"mount_point": "/", "fs_type": "xfs", "source": "s"}]);
        std::fs::write(&p, v.to_string()).unwrap();
        let m = crate::Manifest::load(dir.path()).unwrap();
        assert_eq!(m.mounts.unwrap()[0].fs_type, "xfs");
    }
}
