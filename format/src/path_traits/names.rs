//! What a path's name alone says about a file: code, a checkpoint, a log,
//! a run record. What the job did with it decides among these (the roles'
//! rules, `iorepro_analysis::roles`).

/// Whether `path` is `dir` or lies beneath it, component by component.
pub fn under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn extension(name: &str) -> &str {
    name.rsplit_once('.').map(|(_, e)| e).unwrap_or("")
}

/// Python sources and byte code, shared libraries, installed packages and
/// their metadata, an environment's configuration (`pyvenv.cfg`, `.pth`
/// and `.egg-link` files, which live in site-packages), the system's
/// program and library trees, executables, and a user's tool settings and
/// caches (see [`in_home_settings`]).
pub fn looks_like_code(p: &str) -> bool {
    if in_home_settings(p) {
        return true;
    }
    const TREES: [&str; 8] = [
        "/usr",
        "/lib",
        "/lib64",
        "/bin",
        "/sbin",
        "/opt/conda",
        "/snap",
        "/nix",
    ];
    if TREES.iter().any(|t| under(p, t)) {
        return true;
    }
    let name = file_name(p);
    if matches!(
        extension(name),
        "py" | "pyc" | "pyi" | "pyx" | "pxd" | "so" | "egg-link"
    ) || name.contains(".so.")
        || name == ".python-version"
        || name == "pyvenv.cfg"
    {
        return true;
    }
    // The components walked once, each with the one before it: a file in
    // a `bin` directory, or anything beneath `lib/python*`.
    let (mut before, mut last) = (None, None);
    for c in p.split('/') {
        let code_dir = matches!(
            c,
            "site-packages" | "dist-packages" | "__pycache__" | ".pyenv"
        ) || c.ends_with(".dist-info")
            || c.ends_with(".egg-info")
            || c.starts_with("torchinductor_")
            || c.starts_with("triton");
        if code_dir || last == Some("lib") && c.starts_with("python") {
            return true;
        }
        (before, last) = (last, Some(c));
    }
    matches!(before, Some("bin" | "sbin"))
}

/// A dot-folder of a home directory (`~/.cache`, `~/.config`, `~/.nv`
/// with CUDA's compiled kernels, `~/.triton`, `~/.local`): the settings
/// and caches of the tools a job starts with (matplotlib's font list,
/// accelerate's configuration), part of its environment as its code is,
/// never its data or its saves. Left to the other rules: what model hubs
/// and dataset libraries download there (`~/.cache/huggingface/hub`,
/// `.../datasets`, `~/.cache/torch/hub`, `~/.keras`), which a job reads as
/// its weights or its data.
fn in_home_settings(p: &str) -> bool {
    let mut comps = p.split('/').filter(|c| !c.is_empty());
    let dot = match comps.next() {
        Some("root") => comps.next(),
        Some("home") => comps.nth(1),
        _ => None,
    };
    let Some(dot) = dot.filter(|d| d.starts_with('.') && d.len() > 1 && *d != "..") else {
        return false;
    };
    let downloads = matches!(
        (dot, comps.next(), comps.next()),
        (".keras", ..)
            | (
                ".cache",
                Some("huggingface"),
                Some("hub" | "datasets" | "transformers")
            )
            | (".cache", Some("torch"), Some("hub"))
    );
    !downloads
}

/// Saved state read back: a model's weights, an optimizer's state, a
/// distributed checkpoint's shards.
pub fn looks_like_checkpoint(p: &str) -> bool {
    let lower = p.to_ascii_lowercase();
    let name = file_name(&lower);
    matches!(
        extension(name),
        "pt" | "pth" | "ckpt" | "safetensors" | "distcp"
    ) || name.starts_with("zero_pp_rank_")
        || lower.contains("checkpoint")
        || lower.contains("ckpt")
}

/// Saved state as the job writes it: the names of
/// [`looks_like_checkpoint`], and the formats a save uses that a dataset
/// uses too (`.bin`, `.npz`), which say *checkpoint* only of a file written.
pub fn written_like_checkpoint(p: &str) -> bool {
    looks_like_checkpoint(p) || matches!(extension(file_name(p)), "bin" | "npz")
}

/// A log by its name: `*.log` (and a rotated `*.log.N`), `*.out`, `*.err`,
/// a file named `stdout` or `stderr`.
pub fn log_name(p: &str) -> bool {
    let name = file_name(p);
    let rotated = name
        .rsplit_once(".log.")
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    matches!(extension(name), "log" | "out" | "err")
        || rotated
        || matches!(name, "stdout" | "stderr")
}

/// A text file, a log when the job appends to it.
pub fn text_name(p: &str) -> bool {
    extension(file_name(p)) == "txt"
}

/// The formats of a run's records: configuration, statistics, results.
pub fn record_format(p: &str) -> bool {
    matches!(
        extension(file_name(p)),
        "json" | "yaml" | "yml" | "csv" | "toml" | "txt"
    )
}

/// A record by its name or place: what Hydra keeps in `.hydra/`, a
/// `summary.json`, `per_epoch_stats.json`, `*_output.json` (DLIO's), a
/// record under an `outputs/` directory.
pub fn record_name(p: &str) -> bool {
    if !record_format(p) {
        return false;
    }
    let name = file_name(p);
    let dirs = p.rsplit_once('/').map_or("", |(d, _)| d);
    matches!(name, "summary.json" | "per_epoch_stats.json")
        || name.ends_with("_output.json")
        || dirs.split('/').any(|c| matches!(c, ".hydra" | "outputs"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(looks_like_code("/home/u/venv/pyvenv.cfg"));
        assert!(looks_like_code(
            "/venv/lib/python3.12/site-packages/distutils-precedence.pth"
        ));
        assert!(looks_like_code(
            "/home/u/.local/lib/python3.11/site-packages/x.egg-link"
        ));
        assert!(looks_like_code("/home/u/src/x.egg-link"));
        assert!(looks_like_code(
            "/venv/lib/python3.12/site-packages/torch-2.4.dist-info/RECORD"
        ));
        assert!(!looks_like_code("/ckpt/model.pth"));
        for settings in [
            "/root/.cache/matplotlib/fontlist-v3.11.0.json",
            "/root/.nv/ComputeCache/a/2/daf144f9da5951",
            "/root/.cache/huggingface/accelerate/default_config.yaml",
            "/home/u/.config/matplotlib/matplotlibrc",
            "/home/u/.triton/cache/x/kernel.cubin",
            "/root/.cache",
            "/root/.cache/torch/kernels/x.bin",
        ] {
            assert!(looks_like_code(settings), "{settings}");
        }
        for data in [
            "/root/.cache/huggingface/hub/models--gpt2/snapshots/x/model.safetensors",
            "/home/u/.cache/torch/hub/checkpoints/resnet50.pth",
            "/home/u/.keras/datasets/mnist.npz",
            "/home/u/.cache/huggingface/datasets/c4/train-00000.arrow",
            "/home/u/data/.hidden/x.bin",
            "/root/data/x.npz",
            "/home/u/train.log",
        ] {
            assert!(!looks_like_code(data), "{data}");
        }
        assert!(looks_like_checkpoint("/ckpt/model.pth"));
        assert!(looks_like_checkpoint(
            "/c/zero_pp_rank_0_mp_rank_00_optim_states"
        ));
        assert!(!looks_like_checkpoint("/data/train/img_0001.npz"));
        assert!(written_like_checkpoint("/out/state_0001.npz"));
        assert!(log_name("/w/out-2/dlio.log"));
        assert!(log_name("/w/d2.log"));
        assert!(log_name("/w/slurm-42.out"));
        assert!(log_name("/w/train.log.3"));
        assert!(!log_name("/w/catalog"));
        assert!(!log_name("/w/x.log.tmp"));
        assert!(record_name("/w/out-2/.hydra/config.yaml"));
        assert!(record_name("/w/out-2/summary.json"));
        assert!(record_name("/w/out-2/0_output.json"));
        assert!(record_name("/w/outputs/2024-01-01/12-00-00/metrics.csv"));
        assert!(!record_name("/w/out-2/results.json"));
        assert!(!record_name("/w/outputs/model.pt"));
        assert!(record_format("/w/out-2/results.json"));
    }
}
