//! Descriptor history the collector must see through: a descriptor open
//! before the job started, dup, dup2, openat with a directory fd, reuse of a
//! closed number, a description shared across fork, O_APPEND, readv, and a
//! relative path after chdir. Each read or write must carry the right path
//! and exact offset.

mod common;

use common::*;
use iorepro_format::Op;

const SCRIPT: &str = r#"
import os, sys
d = sys.argv[1]
os.read(0, 100)                          # pre.dat @0 (stdin, opened before the job)
os.lseek(0, 1000, 0); os.read(0, 50)     # pre.dat @1000
a = os.open(f"{d}/a.dat", os.O_RDONLY)
b = os.dup(a)
os.read(b, 10)                           # a.dat @0
os.dup2(a, 50)
os.read(50, 20)                          # a.dat @10: one shared description
dfd = os.open(f"{d}/sub", os.O_RDONLY | os.O_DIRECTORY)
e = os.open("b.dat", os.O_RDONLY, dir_fd=dfd)
os.pread(e, 30, 5)                       # sub/b.dat @5
os.close(a)
c = os.open(f"{d}/c.dat", os.O_RDONLY)
assert c == a, (c, a)                    # the number is reused for another file
os.read(c, 40)                           # c.dat @0
os.readv(50, [bytearray(3), bytearray(4)])  # a.dat @30, 7 bytes
w = os.open(f"{d}/w.dat", os.O_WRONLY | os.O_APPEND)
os.write(w, b"x" * 7)                    # w.dat @4096 (appended)
pid = os.fork()
if pid == 0:
    os.read(b, 5)                        # a.dat @37, in the child
    os._exit(0)
os.waitpid(pid, 0)
os.read(50, 6)                           # a.dat @42: the child moved the shared offset
os.chdir(f"{d}/sub")
h = os.open("../a.dat", os.O_RDONLY)
os.pread(h, 8, 100)                      # a.dat @100 via a relative path
os.write(os.open("new.dat", os.O_WRONLY | os.O_CREAT, 0o644), b"y" * 9)  # sub/new.dat @0
"#;

#[test]
fn paths_and_offsets_survive_descriptor_games() {
    if !can_trace() || !have("python3") {
        return;
    }
    let dir = scratch();
    let d = dir.path();
    std::fs::create_dir(d.join("sub")).unwrap();
    for f in ["pre.dat", "a.dat", "sub/b.dat", "c.dat", "w.dat"] {
        write_file(&d.join(f), 4096);
    }
    let script = d.join("fds.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = d.join("trace");
    let o = collector()
        .arg("--out")
        .arg(&out)
        .args(["--path-prefix", d.to_str().unwrap(), "--", "python3"])
        .arg(&script)
        .arg(d)
        .stdin(std::fs::File::open(d.join("pre.dat")).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (_, rows) = read_rows(&out);
    let data: Vec<(String, Op, i64, i64)> = rows
        .iter()
        .filter(|r| matches!(r.op, Op::Read | Op::Write))
        .map(|r| {
            let p = r.path.clone().unwrap_or_default();
            let rel = p
                .strip_prefix(d.to_str().unwrap())
                .unwrap_or(&p)
                .to_string();
            (rel, r.op, r.offset.unwrap(), r.size.unwrap())
        })
        .collect();
    let want: Vec<(&str, Op, i64, i64)> = vec![
        ("/pre.dat", Op::Read, 0, 100),
        ("/pre.dat", Op::Read, 1000, 50),
        ("/a.dat", Op::Read, 0, 10),
        ("/a.dat", Op::Read, 10, 20),
        ("/sub/b.dat", Op::Read, 5, 30),
        ("/c.dat", Op::Read, 0, 40),
        ("/a.dat", Op::Read, 30, 7),
        ("/w.dat", Op::Write, 4096, 7),
        ("/a.dat", Op::Read, 37, 5),
        ("/a.dat", Op::Read, 42, 6),
        ("/a.dat", Op::Read, 100, 8),
        ("/sub/new.dat", Op::Write, 0, 9),
    ];
    let got: Vec<(&str, Op, i64, i64)> = data
        .iter()
        .map(|(p, op, o, s)| (p.as_str(), *op, *o, *s))
        .collect();
    // The script itself is read by python too; only the data files are compared.
    let got: Vec<_> = got
        .into_iter()
        .filter(|(p, ..)| p.ends_with(".dat"))
        .collect();
    assert_eq!(got, want);
}
