"""What a metadata server feels of a training job: stats, listings through
os.scandir, os.walk and pathlib, directories made, checkpoints written under
a temporary name and renamed, links, probes for files that are not there.
Run as: python3 metadata_storm.py DIR (DIR exists and is empty)."""
import os, pathlib, sys
d = sys.argv[1]
os.makedirs(f"{d}/data/a/b", exist_ok=True)           # mkdir each level (EEXIST where present)
for i in range(5):
    with open(f"{d}/data/a/f{i}.bin", "wb") as f:
        f.write(b"x" * 100)
for step in range(2):                                  # checkpoints: tmp name, then rename
    os.mkdir(f"{d}/ckpt-{step}")
    tmp = f"{d}/ckpt-{step}/model.pt.tmp"
    with open(tmp, "wb") as f:
        f.write(b"w" * 4096)
    os.rename(tmp, f"{d}/ckpt-{step}/model.pt")
os.link(f"{d}/ckpt-1/model.pt", f"{d}/hard.pt")
os.symlink(f"{d}/ckpt-1", f"{d}/latest")
for e in os.scandir(f"{d}/data/a"):
    e.stat()
    e.is_dir()
for root, dirs, files in os.walk(f"{d}/data"):
    for n in files:
        os.stat(os.path.join(root, n))
for p in pathlib.Path(f"{d}/data").rglob("*.bin"):
    p.exists()
for i in range(3):                                     # probing for files that are not there
    os.path.exists(f"{d}/data/missing-{i}.bin")
    try:
        open(f"{d}/data/missing-{i}.idx")
    except FileNotFoundError:
        pass
os.access(f"{d}/data", os.R_OK)
os.access(f"{d}/nope", os.F_OK)
os.unlink(f"{d}/hard.pt")
os.unlink(f"{d}/latest")
os.rmdir(f"{d}/data/a/b")
try:
    os.rmdir(f"{d}/data")                              # not empty: ENOTEMPTY
except OSError:
    pass
